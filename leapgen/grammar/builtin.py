"""Built-in grammars, written in GBNF (see :mod:`leapgen.grammar.ebnf`).

- :data:`JSON_GBNF`: xgrammar's builtin JSON grammar's language, an object or
  an array at the root (what :meth:`GrammarCompiler.compile_builtin_json_grammar`
  compiles);
- :data:`JSON_VALUE_GBNF`: any JSON value at the root, scalars included
  (:meth:`GrammarCompiler.compile_json_value_grammar`).

Both nest to any depth and bound each whitespace run (64 characters:
``json.dumps(indent=2)`` nests 30 deep), so a model cannot loop on whitespace.
"""

_JSON_RULES = r"""
value   ::= object | array | string | number | "true" | "false" | "null"
object  ::= "{" ws ( member ( "," ws member )* )? "}"
member  ::= string ws ":" ws value ws
array   ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
string  ::= "\"" char* "\""
char    ::= [^"\\\x00-\x1f] | "\\" ( ["\\/bfnrt] | "u" hex hex hex hex )
hex     ::= [0-9a-fA-F]
number  ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?
ws      ::= [ \t\n\r]{0,64}
"""

#: An object or an array (RFC 8259 values nested inside), as xgrammar's builtin JSON grammar.
JSON_GBNF = "# A JSON object or array (RFC 8259), nested to any depth.\nroot    ::= object | array" + _JSON_RULES

#: Any JSON value (RFC 8259), scalars included, nested to any depth.
JSON_VALUE_GBNF = "# Any JSON value (RFC 8259), nested to any depth.\nroot    ::= value" + _JSON_RULES

"""Built-in grammars, written in GBNF (see :mod:`leapgen.grammar.ebnf`)."""

JSON_GBNF = r"""
# Any JSON value (RFC 8259), nested to any depth.
# Whitespace runs are bounded (64 characters: json.dumps(indent=2) nests 30 deep), so a model cannot loop on whitespace.
root    ::= value
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

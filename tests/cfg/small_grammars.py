"""Small recursive grammars shared by the context-free tests."""

# Nested arithmetic: recursion through parentheses and unary minus.
ARITH_GBNF = r"""
root   ::= expr
expr   ::= term ( ws [-+] ws term )*
term   ::= factor ( ws [*/] ws factor )*
factor ::= number | "(" ws expr ws ")" | "-" factor
number ::= [0-9]+ ( "." [0-9]+ )?
ws     ::= " "?
"""

-- Line 6 reads a parameter the family does not declare.
return lntune.family {
    op = "undeclared", target = "test", params = { { name = "n", values = { 1 } } },
    source = lntune.template [==[
int a;
int b[{{p.width}}];
]==],
}

-- The template body has a Lua syntax error on line 6 (reported on line 7, where Lua sees it).
return lntune.family {
    op = "syntax", target = "test", params = { { name = "n", values = { 1 } } },
    source = lntune.template [==[
int a;
@ for i = 1, p.n
int b;
@ end
]==],
}

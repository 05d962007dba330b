-- The template body fails at run time on line 6.
return lntune.family {
    op = "runtime", target = "test", params = { { name = "n", values = { 1 } } },
    source = lntune.template [==[
int a;
@ local t = nil; local x = t.field
int b;
]==],
}

-- Line 5 opens {{ and never closes it.
return lntune.family {
    op = "unterminated", target = "test", params = { { name = "n", values = { 1 } } },
    source = lntune.template [==[
int a = {{ p.n ;
]==],
}

-- Line 6 interpolates an expression that is nil.
return lntune.family {
    op = "nilvalue", target = "test", params = { { name = "n", values = { 1 } } },
    source = lntune.template [==[
int a;
int b = {{ ({}).missing }};
]==],
}

-- A minimal family: two parameters, a constraint, a derived name, a loop and interpolation.
return lntune.family {
    op = "good",
    target = "test",
    params = {
        { name = "n", values = { 1, 2, 3 } },
        { name = "kind", values = { "a", "b" } },
    },
    valid = function(p) return not (p.n == 3 and p.kind == "b"), "n=3 needs kind=a" end,
    derive = function(p) return { twice = 2 * p.n } end,
    file_scope_names = { "helper" },
    source = lntune.template [==[
int helper(void) { return {{twice}}; }
@ for i = 1, p.n do
int {{symbol}}_{{i}}_{{p.kind}};
@ end
]==],
}

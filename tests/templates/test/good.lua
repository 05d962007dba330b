-- A minimal family: two parameters, a constraint, a derived name, a loop and interpolation; and
-- named presets (lntune_gen_preset): tables and functions of host and shape, and faulty ones.
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
    presets = {
        plain = { kind = "b", n = 2 },
        partial = { kind = "b" },
        shaped = function(_, shape)
            return { n = shape.H and 3 or 1, kind = shape.affine == "none" and "b" or "a" }
        end,
        unknown = { n = 2, width = 4 },
        badvalue = { n = 7 },
        invalid = { n = 3, kind = "b" },
        notable = function() return 5 end,
        fails = function() error("this preset fails") end,
    },
    source = lntune.template [==[
int helper(void) { return {{twice}}; }
@ for i = 1, p.n do
int {{symbol}}_{{i}}_{{p.kind}};
@ end
]==],
}

-- A preset that is neither a table of knob values nor a function returning one.
return lntune.family {
    op = "badpreset",
    target = "test",
    params = { { name = "n", values = { 1, 2 } } },
    presets = { builtin = "n=2" },
    source = lntune.template [==[
int {{symbol}};
]==],
}

-- The family file itself does not parse (line 3).
return lntune.family {
    op = = "filesyntax",
}

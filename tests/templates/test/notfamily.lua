-- Returns a plain table instead of lntune.family{...}.
return { op = "notfamily" }

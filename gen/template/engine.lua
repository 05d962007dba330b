-- engine.lua - the lntune template engine, embedded in the lntune binary by gen/template/generator.c.
--
-- A template family is a Lua file under templates/<target>/<op>.lua that returns
-- lntune.family{...}: its parameter space (names, allowed values, constraints) and its source
-- template. A source template is text in which
--   * a line whose first non-blank character is '@' is Lua code (loops, conditions, locals);
--   * {{ expr }} is replaced by the value of the Lua expression expr;
--   * every other character is copied as it is.
-- Templates are compiled to Lua functions whose line numbers match the template file, so every
-- error names the template file and line.

local engine = {}

-- C fills these in before loading any family.
engine.readfile = nil   -- function(relpath) -> text or nil, message
engine.abi_header = ""  -- text of include/lntune_kernel.h

local Template = {}
Template.__index = Template

-- lntune.template [==[
-- ...text...
-- ]==]
-- The text must start on the line after the call, as Lua drops the newline that follows "[==[".
local function template(text)
    local info = debug.getinfo(2, "Sl")
    return setmetatable({ text = text, source = info.source, line = info.currentline + 1 }, Template)
end

local function where(source, line)
    return (source:gsub("^[@=]", "")) .. ":" .. line .. ": "
end

-- Translates template text into Lua source whose line N is template line N.
local function translate(t)
    local code = { "local _o, _x, _ENV = ...; " .. string.rep("\n", t.line - 1) }
    local text = t.text
    if text:sub(-1) ~= "\n" then text = text .. "\n" end
    local lineno = t.line
    for line in text:gmatch("(.-)\n") do
        local lua = line:match("^%s*@(.*)$")
        if lua then
            code[#code + 1] = lua .. "\n"
        else
            local pos = 1
            while true do
                local open = line:find("{{", pos, true)
                if not open then
                    if pos <= #line then code[#code + 1] = string.format("_o(%q) ", line:sub(pos)) end
                    break
                end
                if open > pos then
                    code[#code + 1] = string.format("_o(%q) ", line:sub(pos, open - 1))
                end
                local close = line:find("}}", open + 2, true)
                if not close then error(where(t.source, lineno) .. "unterminated '{{'", 0) end
                local expr = line:sub(open + 2, close - 1)
                code[#code + 1] = string.format("_o(_x((%s), %q)) ", expr, expr)
                pos = close + 2
            end
            code[#code + 1] = '_o("\\n")\n'
        end
        lineno = lineno + 1
    end
    return table.concat(code)
end

local function expand(value, expr)
    if value == nil then error("template expression '" .. expr .. "' is nil", 2) end
    if type(value) == "boolean" then return value and "1" or "0" end
    return tostring(value)
end

function Template:render(env)
    if not self.fn then
        local fn, err = load(translate(self), self.source, "t")
        if not fn then error(err, 0) end
        self.fn = fn
    end
    local out = {}
    self.fn(function(s) out[#out + 1] = s end, expand, env)
    return table.concat(out)
end

-- A table that raises an error naming the template line when a missing name is read.
local function strict(t, what)
    return setmetatable(t, {
        __index = function(_, k) error(what .. " '" .. tostring(k) .. "' is not defined", 2) end,
    })
end

local function family(spec)
    local here = getmetatable(spec.source) == Template and where(spec.source.source, spec.source.line - 1) or ""
    if type(spec.op) ~= "string" or type(spec.target) ~= "string" then
        error(here .. "family needs string fields op and target", 2)
    end
    if getmetatable(spec.source) ~= Template then
        error(here .. "family needs source = lntune.template [==[ ... ]==]", 2)
    end
    local seen = {}
    for i, p in ipairs(spec.params or {}) do
        if type(p.name) ~= "string" or not p.name:match("^[%a_][%w_]*$") then
            error(here .. "parameter " .. i .. " needs a name", 2)
        end
        if seen[p.name] then error(here .. "parameter '" .. p.name .. "' declared twice", 2) end
        if type(p.values) ~= "table" and type(p.values) ~= "function" then
            error(here .. "parameter '" .. p.name .. "' needs values (a list or a function)", 2)
        end
        seen[p.name] = true
    end
    if spec.presets ~= nil and type(spec.presets) ~= "table" then
        error(here .. "presets must be a table of named presets", 2)
    end
    for name, preset in pairs(spec.presets or {}) do
        if type(preset) ~= "table" and type(preset) ~= "function" then
            error(here .. "preset '" .. tostring(name) .. "' needs knob values (a table or a function)",
                2)
        end
    end
    return spec
end

-- The environment in which family files (and the helpers they import) run: Lua's base library
-- plus the engine's API. imports collects the text of every imported file for the hash.
local function family_env(imports)
    local env = setmetatable({}, { __index = _ENV })
    env.lntune = {
        template = template,
        family = family,
        abi_header = function() return engine.abi_header end,
        import = function(relpath)
            local text, err = engine.readfile(relpath)
            if not text then error(err, 2) end
            imports[#imports + 1] = text
            local chunk, cerr = load(text, "@templates/" .. relpath, "t", env)
            if not chunk then error(cerr, 0) end
            return chunk()
        end,
    }
    return env
end

-- 64-bit FNV-1a, as 16 hex digits; Lua integers wrap on overflow, which FNV relies on.
local function fnv1a(texts)
    local h = -3750763034362895579 -- 0xcbf29ce484222325
    for _, s in ipairs(texts) do
        for i = 1, #s do h = (h ~ s:byte(i)) * 1099511628211 end
    end
    return string.format("%016x", h)
end

local families = {}

-- Returns the family for target/op, loading templates/<target>/<op>.lua on first use.
function engine.family(target, op)
    local key = target .. "/" .. op
    if families[key] then return families[key] end
    local relpath = key .. ".lua"
    local text, err = engine.readfile(relpath)
    if not text then error("no template for op '" .. op .. "' on target '" .. target .. "' (" .. err .. ")", 0) end
    local imports = {}
    local chunk, cerr = load(text, "@templates/" .. relpath, "t", family_env(imports))
    if not chunk then error(cerr, 0) end
    local fam = chunk()
    if type(fam) ~= "table" or getmetatable(fam.source) ~= Template then
        error("templates/" .. relpath .. ": must return lntune.family{...}", 0)
    end
    fam.source_file = "templates/" .. relpath
    local all = { engine.engine_text or "", text }
    for _, t in ipairs(imports) do all[#all + 1] = t end
    fam.hash = fnv1a(all)
    families[key] = fam
    return fam
end

local function values_of(fam, p, host, shape)
    if type(p.values) == "function" then return p.values(host, shape) end
    return p.values
end

-- "name=value,..." in declaration order; code_only leaves out launch parameters (such as
-- threads), which change how a kernel is called but not its source.
local function canonical(fam, params, code_only)
    local parts = {}
    for _, p in ipairs(fam.params) do
        if not (code_only and p.launch) then parts[#parts + 1] = p.name .. "=" .. tostring(params[p.name]) end
    end
    return table.concat(parts, ",")
end

local function check(fam, params, host, shape)
    if not fam.valid then return true end
    local ok, why = fam.valid(params, host, shape)
    return ok, why
end

-- Every valid variant for host and shape, as canonical parameter strings in declaration order.
function engine.variants(fam, host, shape)
    local lists = {}
    for i, p in ipairs(fam.params) do lists[i] = values_of(fam, p, host, shape) end
    local out, current = {}, {}
    local function walk(i)
        if i > #fam.params then
            if check(fam, current, host, shape) then out[#out + 1] = canonical(fam, current) end
            return
        end
        for _, v in ipairs(lists[i]) do
            current[fam.params[i].name] = v
            walk(i + 1)
        end
        current[fam.params[i].name] = nil
    end
    walk(1)
    return out
end

-- One line per parameter: "name: v1 v2 ... - doc".
function engine.describe(fam, host, shape)
    local lines = {}
    for _, p in ipairs(fam.params) do
        local names = {}
        for _, v in ipairs(values_of(fam, p, host, shape)) do names[#names + 1] = tostring(v) end
        lines[#lines + 1] = string.format("  %-9s %-28s %s", p.name, table.concat(names, " "), p.doc or "")
    end
    return table.concat(lines, "\n") .. "\n"
end

-- The names of the parameters declared family = true, comma-separated: knobs whose values a phase
-- of a shared host can favour or hide as a whole (store kind, thread count, row grouping,
-- prefetch), so the tuner's final always holds the best of each value (gen/tune/tuner.c).
function engine.families(fam)
    local names = {}
    for _, p in ipairs(fam.params) do
        if p.family then names[#names + 1] = p.name end
    end
    return table.concat(names, ",")
end

-- Parses "name=value,..." into a parameter table. Names left out take their first value.
function engine.parse(fam, text, host, shape)
    local declared, params = {}, {}
    for _, p in ipairs(fam.params) do declared[p.name] = p end
    for item in (text or ""):gmatch("[^,]+") do
        local k, v = item:match("^%s*([%w_]+)%s*=%s*(.-)%s*$")
        if not k then error("variant item '" .. item .. "' is not name=value", 0) end
        local p = declared[k]
        if not p then error("unknown parameter '" .. k .. "' for " .. fam.target .. "/" .. fam.op, 0) end
        if params[k] ~= nil then error("parameter '" .. k .. "' given twice", 0) end
        local found
        local allowed = values_of(fam, p, host, shape)
        for _, a in ipairs(allowed) do
            if tostring(a) == v then found = a end
        end
        if found == nil then
            local names = {}
            for _, a in ipairs(allowed) do names[#names + 1] = tostring(a) end
            error("parameter '" .. k .. "' = '" .. v .. "' is not one of " .. table.concat(names, ", ")
                .. " (declared in " .. fam.source_file .. ")", 0)
        end
        params[k] = found
    end
    for _, p in ipairs(fam.params) do
        if params[p.name] == nil then params[p.name] = values_of(fam, p, host, shape)[1] end
    end
    local ok, why = check(fam, params, host, shape)
    if not ok then
        error("variant " .. canonical(fam, params) .. " is not valid here: " .. tostring(why), 0)
    end
    return params
end

-- The canonical variant of the family's preset name (fam.presets[name]: a table of knob values,
-- or a function of host and shape that returns one; knobs left out take their first value), as
-- parse checks a variant string. Returns the variant, or nil, "notfound" or "invalid", and why.
function engine.preset(fam, name, host, shape)
    local preset = (fam.presets or {})[name]
    if preset == nil then
        local names = {}
        for n in pairs(fam.presets or {}) do names[#names + 1] = tostring(n) end
        table.sort(names)
        return nil, "notfound", "no preset '" .. name .. "' for " .. fam.target .. "/" .. fam.op .. " ("
            .. fam.source_file .. " has " .. (#names > 0 and table.concat(names, ", ") or "none") .. ")"
    end
    if type(preset) == "function" then preset = preset(host, shape) end
    if type(preset) ~= "table" then
        error(fam.source_file .. ": preset '" .. name .. "' gave a " .. type(preset)
            .. ", not a table of knob values", 0)
    end
    -- "name=value,..." in declaration order, then any undeclared names for parse to refuse.
    local items, declared = {}, {}
    for _, p in ipairs(fam.params) do
        declared[p.name] = true
        if preset[p.name] ~= nil then items[#items + 1] = p.name .. "=" .. tostring(preset[p.name]) end
    end
    local unknown = {}
    for k in pairs(preset) do
        if not declared[k] then unknown[#unknown + 1] = tostring(k) .. "=" .. tostring(preset[k]) end
    end
    table.sort(unknown)
    for _, item in ipairs(unknown) do items[#items + 1] = item end
    local ok, params = pcall(engine.parse, fam, table.concat(items, ","), host, shape)
    if not ok then
        return nil, "invalid", "preset '" .. name .. "' for " .. fam.target .. "/" .. fam.op .. ": " .. tostring(params)
    end
    return canonical(fam, params)
end

-- Renders the family's source for params. Returns the source, the canonical variant string,
-- and the properties the C side reads (threads, affine, cflags ...) from fam.properties.
function engine.emit(fam, params, host, shape, symbol)
    local variant = canonical(fam, params)
    local code_variant = canonical(fam, params, true)
    local env = { host = host, shape = shape, symbol = symbol, variant = code_variant, lntune = {
        abi_header = function() return engine.abi_header end } }
    -- Reading an undeclared parameter is an error at the template line that reads it.
    env.p = setmetatable({}, {
        __index = function(_, k)
            local v = params[k]
            if v == nil then error("template parameter '" .. tostring(k) .. "' is not declared", 2) end
            return v
        end,
    })
    if fam.derive then
        for k, v in pairs(fam.derive(params, host, shape)) do env[k] = v end
    end
    for k, v in pairs(_ENV) do if env[k] == nil then env[k] = v end end
    local body = fam.source:render(strict(env, "name"))
    -- A kernel with its own symbol may share a translation unit with others (lntune export):
    -- prefix the file-scope names the family declares, so that no two kernels collide.
    if symbol ~= "lntune_kernel" then
        for _, name in ipairs(fam.file_scope_names or {}) do
            body = body:gsub("%f[%w_]" .. name .. "%f[^%w_]", symbol .. "_" .. name)
        end
    end
    local header = string.format("/*\n * Generated by lntune from %s, template hash %s.\n"
        .. " * variant: %s\n * shape: %s\n */\n", fam.source_file, fam.hash, code_variant,
        shape.H and ("H=" .. shape.H) or "any H")
    local props = fam.properties and fam.properties(params, host, shape) or {}
    return header .. body, variant, props
end

engine.Template = Template
return engine

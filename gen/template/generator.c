/*
 * generator.c - the C side of the template engine: a Lua 5.4 state running gen/template/engine.lua,
 * fed the host's features, reading templates from a directory or from the copies built into the
 * binary.
 */
#include "generator.h"

#include "embedded.h"
#include "fusion.h"
#include "hardware.h"
#include "lntune.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lntune_gen {
    lua_State *L;
    int engine_ref; /* registry reference to the engine module table */
    char *template_dir;
    lntune_cpu_info cpu;
    uint32_t host_isa; /* cpu.isa as detected; lntune_gen_set_isa(g, 0) restores it */
    int cuda_sm;       /* host.sm for CUDA templates; 0: not set */
    char errmsg[2048];
};

static void set_error(lntune_gen *g, const char *fmt, const char *detail) {
    snprintf(g->errmsg, sizeof g->errmsg, fmt, detail ? detail : "");
}

/* engine.readfile(relpath): text, or nil and a message. Relative paths only, no "..". */
static int l_readfile(lua_State *L) {
    lntune_gen *g = lua_touserdata(L, lua_upvalueindex(1));
    const char *rel = luaL_checkstring(L, 1);
    if (rel[0] == '/' || strstr(rel, "..")) {
        lua_pushnil(L);
        lua_pushfstring(L, "template path '%s' must be relative, without '..'", rel);
        return 2;
    }
    if (!g->template_dir) {
        const embedded_file *f = lntune_embedded_find(lntune_embedded_templates, rel);
        if (!f) {
            lua_pushnil(L);
            lua_pushfstring(L, "templates/%s is not built into lntune", rel);
            return 2;
        }
        lua_pushlstring(L, f->text, f->len);
        return 1;
    }
    /* A ':'-separated search path; the built-in templates come last. */
    char path[4096];
    FILE *fp = NULL;
    for (const char *dir = g->template_dir; *dir && !fp;) {
        size_t len = strcspn(dir, ":");
        snprintf(path, sizeof path, "%.*s/%s", (int)len, dir, rel);
        fp = fopen(path, "rb");
        dir += len + (dir[len] == ':');
    }
    if (!fp) {
        const embedded_file *f = lntune_embedded_find(lntune_embedded_templates, rel);
        if (f) {
            lua_pushlstring(L, f->text, f->len);
            return 1;
        }
        lua_pushnil(L);
        lua_pushfstring(L, "no %s in %s or built into lntune", rel, g->template_dir);
        return 2;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    size_t n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) luaL_addlstring(&b, chunk, n);
    fclose(fp);
    luaL_pushresult(&b);
    return 1;
}

/* Message handler for lua_pcall: keeps string messages, describes anything else. */
static int message_handler(lua_State *L) {
    if (lua_type(L, 1) != LUA_TSTRING) {
        const char *what = luaL_typename(L, 1);
        lua_pushfstring(L, "(error object is a %s value)", what);
    }
    return 1;
}

/* Calls engine[fn] with the nargs values on the stack; leaves nres results. */
static int call_engine(lntune_gen *g, const char *fn, int nargs, int nres) {
    lua_State *L = g->L;
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, message_handler);
    lua_rawgeti(L, LUA_REGISTRYINDEX, g->engine_ref);
    lua_getfield(L, -1, fn);
    lua_remove(L, -2);
    lua_rotate(L, base + 1, 2); /* handler, function, then the arguments */
    if (lua_pcall(L, nargs, nres, base + 1) != LUA_OK) {
        set_error(g, "%s", lua_tostring(L, -1));
        lua_settop(L, base);
        return -1;
    }
    lua_remove(L, base + 1);
    return 0;
}

static void push_host(lntune_gen *g) {
    lua_State *L = g->L;
    lua_createtable(L, 0, 3);
    lua_pushstring(L, g->cpu.arch);
    lua_setfield(L, -2, "arch");
    lua_pushinteger(L, g->cpu.cores);
    lua_setfield(L, -2, "cores");
    lua_createtable(L, 0, LNTUNE_ISA_COUNT);
    for (int i = 0; i < LNTUNE_ISA_COUNT; ++i) {
        lua_pushboolean(L, (g->cpu.isa >> i) & 1);
        lua_setfield(L, -2, lntune_hw_feature_name(i));
    }
    lua_setfield(L, -2, "isa");
    if (g->cuda_sm > 0) {
        lua_pushinteger(L, g->cuda_sm);
        lua_setfield(L, -2, "sm");
    }
}

static void push_shape(lua_State *L, const lntune_shape *shape) {
    lua_createtable(L, 0, 4);
    const lntune_types t = shape ? shape->types : (lntune_types){0};
    /* shape.types = {x = "bf16", y = "f32", params = "f32", residual = "bf16"} */
    lua_createtable(L, 0, 4);
    lua_pushstring(L, lntune_type_name(t.x));
    lua_setfield(L, -2, "x");
    lua_pushstring(L, lntune_type_name(t.y));
    lua_setfield(L, -2, "y");
    lua_pushstring(L, lntune_type_name(t.params));
    lua_setfield(L, -2, "params");
    lua_pushstring(L, lntune_type_name(lntune_types_residual(t)));
    lua_setfield(L, -2, "residual");
    lua_setfield(L, -2, "types");
    if (shape && shape->generic_types) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "generic_types");
    }
    if (shape && shape->fusion != LNTUNE_FUSION_NONE) { /* shape.fusion: absent means none */
        lua_pushstring(L, lntune_fusion_name(shape->fusion));
        lua_setfield(L, -2, "fusion");
    }
    if (shape && shape->H > 0) {
        lua_pushinteger(L, shape->H);
        lua_setfield(L, -2, "H");
    }
    if (shape && shape->rows > 0) {
        lua_pushinteger(L, shape->rows);
        lua_setfield(L, -2, "rows");
    }
    if (shape && shape->affine != LNTUNE_AFFINE_ANY) {
        lua_pushstring(L, shape->affine == LNTUNE_AFFINE_GAMMA    ? "fused"
                          : shape->affine == LNTUNE_AFFINE_OFFSET ? "offset"
                                                                  : "none");
        lua_setfield(L, -2, "affine");
    }
}

int lntune_gen_open(const char *template_dir, lntune_gen **out) {
    if (!out) return LNTUNE_EINVAL;
    *out = NULL;
    lntune_gen *g = calloc(1, sizeof *g);
    if (!g) return LNTUNE_ENOMEM;
    if (!template_dir) template_dir = getenv("LNTUNE_TEMPLATE_DIR");
    if (template_dir && *template_dir && !(g->template_dir = strdup(template_dir))) {
        free(g);
        return LNTUNE_ENOMEM;
    }
    lntune_cpu_info_get(&g->cpu);
    g->host_isa = g->cpu.isa;
    if (!(g->L = luaL_newstate())) {
        free(g->template_dir);
        free(g);
        return LNTUNE_ENOMEM;
    }
    lua_State *L = g->L;
    /* Templates get Lua's computing libraries only: no io, os or package. */
    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
    luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
    luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
    luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
    luaL_requiref(L, LUA_DBLIBNAME, luaopen_debug, 1); /* the engine reads call lines */
    lua_settop(L, 0);

    const embedded_file *engine = lntune_embedded_find(lntune_embedded_engine, "engine.lua");
    const embedded_file *abi = lntune_embedded_find(lntune_embedded_engine, "lntune_kernel.h");
    const embedded_file *bwd =
        lntune_embedded_find(lntune_embedded_engine, "lntune_kernel_backward.h");
    if (!engine || !abi || !bwd) {
        set_error(g, "%s", "lntune was built without gen/template/engine.lua or lntune_kernel.h");
        *out = g;
        return LNTUNE_ERROR;
    }
    if (luaL_loadbufferx(L, engine->text, engine->len, "@gen/template/engine.lua", "t") != LUA_OK ||
        lua_pcall(L, 0, 1, 0) != LUA_OK) {
        set_error(g, "%s", lua_tostring(L, -1));
        *out = g;
        return LNTUNE_ETEMPLATE;
    }
    lua_pushlightuserdata(L, g);
    lua_pushcclosure(L, l_readfile, 1);
    lua_setfield(L, -2, "readfile");
    lua_pushlstring(L, abi->text, abi->len);
    lua_setfield(L, -2, "abi_header");
    /* A global, not an engine field: engine.lua's text is part of every template hash, so the
     * backward ABI reaches the backward templates without a change there. */
    lua_pushlstring(L, bwd->text, bwd->len);
    lua_setglobal(L, "lntune_backward_abi_header");
    lua_pushlstring(L, engine->text, engine->len);
    lua_setfield(L, -2, "engine_text");
    g->engine_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    *out = g;
    return LNTUNE_OK;
}

void lntune_gen_close(lntune_gen *g) {
    if (!g) return;
    if (g->L) lua_close(g->L);
    free(g->template_dir);
    free(g);
}

void lntune_gen_set_cores(lntune_gen *g, int cores) {
    if (g && cores > 0) g->cpu.cores = cores;
}

void lntune_gen_set_isa(lntune_gen *g, uint32_t isa) {
    if (g) g->cpu.isa = isa ? isa : g->host_isa;
}

int lntune_gen_set_cuda_arch(lntune_gen *g, int sm) {
    if (!g || sm < 0) return LNTUNE_EINVAL;
    g->cuda_sm = sm;
    return LNTUNE_OK;
}

const char *lntune_gen_errmsg(const lntune_gen *g) {
    return g ? g->errmsg : "out of memory";
}

/* Pushes the family for target/op. */
static int load_family(lntune_gen *g, const char *target, const char *op) {
    if (!target || !op) {
        set_error(g, "%s", "target and op are required");
        return LNTUNE_EINVAL;
    }
    lua_pushstring(g->L, target);
    lua_pushstring(g->L, op);
    if (call_engine(g, "family", 2, 1) != 0)
        return strstr(g->errmsg, "no template for op") ? LNTUNE_ENOTFOUND : LNTUNE_ETEMPLATE;
    return LNTUNE_OK;
}

int lntune_gen_variants(lntune_gen *g, const char *target, const char *op,
                        const lntune_shape *shape, char ***list, size_t *count) {
    if (!g || !list || !count) return LNTUNE_EINVAL;
    *list = NULL;
    *count = 0;
    lua_State *L = g->L;
    int top = lua_gettop(L);
    int rc = load_family(g, target, op);
    if (rc) return rc;
    push_host(g);
    push_shape(L, shape);
    if (call_engine(g, "variants", 3, 1) != 0) return LNTUNE_ETEMPLATE;
    size_t n = (size_t)luaL_len(L, -1);
    char **items = calloc(n ? n : 1, sizeof *items);
    if (!items) {
        lua_settop(L, top);
        return LNTUNE_ENOMEM;
    }
    for (size_t i = 0; i < n; ++i) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        items[i] = strdup(lua_tostring(L, -1));
        lua_pop(L, 1);
        if (!items[i]) {
            lntune_gen_free_list(items, i);
            lua_settop(L, top);
            return LNTUNE_ENOMEM;
        }
    }
    lua_settop(L, top);
    *list = items;
    *count = n;
    return LNTUNE_OK;
}

void lntune_gen_free_list(char **list, size_t count) {
    if (!list) return;
    for (size_t i = 0; i < count; ++i) free(list[i]);
    free(list);
}

int lntune_gen_describe(lntune_gen *g, const char *target, const char *op, char **text) {
    if (!g || !text) return LNTUNE_EINVAL;
    *text = NULL;
    int top = lua_gettop(g->L);
    int rc = load_family(g, target, op);
    if (rc) return rc;
    push_host(g);
    push_shape(g->L, NULL);
    if (call_engine(g, "describe", 3, 1) != 0) return LNTUNE_ETEMPLATE;
    *text = strdup(lua_tostring(g->L, -1));
    lua_settop(g->L, top);
    return *text ? LNTUNE_OK : LNTUNE_ENOMEM;
}

int lntune_gen_families(lntune_gen *g, const char *target, const char *op, char **csv) {
    if (!g || !csv) return LNTUNE_EINVAL;
    *csv = NULL;
    int top = lua_gettop(g->L);
    int rc = load_family(g, target, op);
    if (rc) return rc;
    if (call_engine(g, "families", 1, 1) != 0) return LNTUNE_ETEMPLATE;
    *csv = strdup(lua_tostring(g->L, -1));
    lua_settop(g->L, top);
    return *csv ? LNTUNE_OK : LNTUNE_ENOMEM;
}

int lntune_gen_preset(lntune_gen *g, const char *target, const char *op, const char *name,
                      const lntune_shape *shape, char **variant) {
    if (!g || !variant) return LNTUNE_EINVAL;
    *variant = NULL;
    if (!name) {
        set_error(g, "%s", "a preset name is required");
        return LNTUNE_EINVAL;
    }
    lua_State *L = g->L;
    int top = lua_gettop(L);
    int rc = load_family(g, target, op);
    if (rc) return rc;
    lua_pushstring(L, name);
    push_host(g);
    push_shape(L, shape);
    if (call_engine(g, "preset", 4, 3) != 0) return LNTUNE_ETEMPLATE;
    if (lua_isstring(L, -3)) {
        *variant = strdup(lua_tostring(L, -3));
        rc = *variant ? LNTUNE_OK : LNTUNE_ENOMEM;
    } else {
        const char *kind = lua_tostring(L, -2);
        set_error(g, "%s", lua_tostring(L, -1));
        rc = kind && strcmp(kind, "notfound") == 0 ? LNTUNE_ENOTFOUND : LNTUNE_EINVAL;
    }
    lua_settop(L, top);
    return rc;
}

static lua_Integer int_field(lua_State *L, int idx, const char *name) {
    lua_getfield(L, idx, name);
    lua_Integer v = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    return v;
}

int lntune_gen_emit(lntune_gen *g, const char *target, const char *op, const char *variant,
                    const lntune_shape *shape, const char *symbol, lntune_source *out) {
    if (!g || !out) return LNTUNE_EINVAL;
    memset(out, 0, sizeof *out);
    lua_State *L = g->L;
    int top = lua_gettop(L);
    int rc = load_family(g, target, op);
    if (rc) return rc;
    int fam = lua_gettop(L);
    /* parse(fam, text, host, shape) */
    lua_pushvalue(L, fam);
    lua_pushstring(L, variant ? variant : "");
    push_host(g);
    push_shape(L, shape);
    if (call_engine(g, "parse", 4, 1) != 0) {
        lua_settop(L, top);
        return LNTUNE_EINVAL;
    }
    int params = lua_gettop(L);
    /* emit(fam, params, host, shape, symbol) -> source, variant, properties */
    lua_pushvalue(L, fam);
    lua_pushvalue(L, params);
    push_host(g);
    push_shape(L, shape);
    lua_pushstring(L, symbol ? symbol : "lntune_kernel");
    if (call_engine(g, "emit", 5, 3) != 0) {
        lua_settop(L, top);
        return LNTUNE_ETEMPLATE;
    }
    out->text = strdup(lua_tostring(L, -3));
    out->variant = strdup(lua_tostring(L, -2));
    out->threads = (int)int_field(L, -1, "threads");
    if (out->threads < 1) out->threads = 1;
    out->fixed_h = int_field(L, -1, "fixed_h");
    lua_getfield(L, -1, "any_alignment");
    out->any_alignment = lua_toboolean(L, -1);
    lua_pop(L, 1);
    lua_getfield(L, -1, "affine");
    {
        const char *a = lua_isstring(L, -1) ? lua_tostring(L, -1) : "none";
        out->affine = strcmp(a, "none") == 0 ? 0 : strcmp(a, "offset") == 0 ? 2 : 1;
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "cflags");
    if (lua_isstring(L, -1)) snprintf(out->cflags, sizeof out->cflags, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, fam, "hash");
    snprintf(out->template_hash, sizeof out->template_hash, "%s",
             lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
    lua_settop(L, top);
    if (!out->text || !out->variant) {
        lntune_source_free(out);
        return LNTUNE_ENOMEM;
    }
    return LNTUNE_OK;
}

void lntune_source_free(lntune_source *s) {
    if (!s) return;
    free(s->text);
    free(s->variant);
    s->text = s->variant = NULL;
}

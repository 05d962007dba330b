/*
 * messages.c - the per-handle messages and the debug log.
 *
 * A handle is shared by every thread of an app, so its message cannot be one buffer: two
 * threads failing at once would write it together. Each thread gets its own buffer per handle
 * (a pthread key), so lntune_errmsg(ctx) is the message of the last failure of the calling
 * thread on ctx. Buffers are also listed on the handle: lntune_close frees those of threads
 * still running, and a thread that exits first frees its own through the key's destructor.
 */
#include "context.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

enum { MSG_SIZE = 512 };

struct lntune_msg {
    lntune *ctx;
    lntune_msg *prev, *next;
    char text[MSG_SIZE];
};

/* Key destructor: the thread exits while the handle is open. */
static void msg_destroy(void *p) {
    lntune_msg *m = p;
    lntune *ctx = m->ctx;
    pthread_mutex_lock(&ctx->msg_lock);
    if (m->prev)
        m->prev->next = m->next;
    else
        ctx->msgs = m->next;
    if (m->next) m->next->prev = m->prev;
    pthread_mutex_unlock(&ctx->msg_lock);
    free(m);
}

/* This thread's buffer, created on its first failure; NULL when out of memory. */
static lntune_msg *thread_msg(lntune *ctx, int create) {
    if (!ctx->have_msg_key) return NULL;
    lntune_msg *m = pthread_getspecific(ctx->msg_key);
    if (m || !create) return m;
    if (!(m = calloc(1, sizeof *m))) return NULL;
    m->ctx = ctx;
    pthread_mutex_lock(&ctx->msg_lock);
    m->next = ctx->msgs;
    if (m->next) m->next->prev = m;
    ctx->msgs = m;
    pthread_mutex_unlock(&ctx->msg_lock);
    if (pthread_setspecific(ctx->msg_key, m) != 0) {
        msg_destroy(m);
        return NULL;
    }
    return m;
}

int lntune_ctx_fail(lntune *ctx, int rc, const char *fmt, ...) {
    lntune_msg *m = thread_msg(ctx, 1);
    if (!m) return rc; /* errmsg falls back to lntune_errstr(rc)'s kind of text */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text, sizeof m->text, fmt, ap);
    va_end(ap);
    return rc;
}

void lntune_ctx_debug(const lntune *ctx, const char *fmt, ...) {
    if (!ctx->debug) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "lntune: %s\n", line);
}

void lntune_ctx_messages_init(lntune *ctx) {
    pthread_mutex_init(&ctx->msg_lock, NULL);
    ctx->have_msg_key = pthread_key_create(&ctx->msg_key, msg_destroy) == 0;
}

void lntune_ctx_messages_free(lntune *ctx) {
    if (ctx->have_msg_key) pthread_key_delete(ctx->msg_key); /* no destructor runs after this */
    for (lntune_msg *m = ctx->msgs, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    ctx->msgs = NULL;
    pthread_mutex_destroy(&ctx->msg_lock);
}

const char *lntune_errmsg(const lntune *ctx) {
    if (!ctx) return "no lntune handle (lntune_open failed or was not called)";
    lntune_msg *m = thread_msg((lntune *)ctx, 0);
    if (!m || !m->text[0]) return "no error on this thread";
    return m->text;
}

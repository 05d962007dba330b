/*
 * db_internal.h - what db_open.c and db_records.c share: the handle's layout and the helpers
 * that put a message on it. Not installed, and hidden from the ELF export table, so that a
 * shared library linking tuning_db exports only the lntune_db_* API.
 */
#ifndef LNTUNE_DB_INTERNAL_H
#define LNTUNE_DB_INTERNAL_H

#include "tuning_db.h"

#include <sqlite3.h>

#define LNTUNE_DB_HIDDEN __attribute__((visibility("hidden")))

struct lntune_db {
    sqlite3 *sq; /* NULL when the open failed: the handle then only carries the message */
    int flags;   /* LNTUNE_DB_* */
    char *path;
    char errmsg[1024];
    int refused; /* the open failed because the file is not a usable lntune database of this
                    schema (as opposed to busy, locked or unreadable): what FORCE may move */
    int busy;    /* the last SQL failure was SQLITE_BUSY or SQLITE_LOCKED: worth a retry */
};

/* Formats the handle's message and returns rc, so a failure is one `return` statement. */
LNTUNE_DB_HIDDEN int lntune_dbi_fail(lntune_db *db, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "what: <sqlite3_errmsg>" for a failed call on db->sq; returns the matching LNTUNE_* code. */
LNTUNE_DB_HIDDEN int lntune_dbi_sqlfail(lntune_db *db, const char *what);

/* The LNTUNE_* code for an SQLite result code. */
LNTUNE_DB_HIDDEN int lntune_dbi_code(int sqlite_rc);

#endif /* LNTUNE_DB_INTERNAL_H */

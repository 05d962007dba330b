/* export.c - placeholder */

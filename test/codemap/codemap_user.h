/* codemap_user.h - user code of test_codemap (not runtime code). */
#ifndef CODEMAP_USER_H
#define CODEMAP_USER_H
int user_timer_fn(int x);
const void *user_timer_static(void);
int xtc_user_something(int x);
#endif

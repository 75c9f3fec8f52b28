/* Where failures are described: the context's message, or the calling
 * thread's slot for calls without a context. Its own file so that every
 * other core file can report without depending on contexts. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local fattn_msg thread_msg;

fattn_msg *fattn_thread_msg(void) { return &thread_msg; }

fattn_status fattn_ctx_fail(fattn_context *ctx, fattn_status status, const char *fmt, ...) {
    fattn_msg *m = ctx ? &ctx->msg : &thread_msg;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->text, sizeof m->text, fmt, ap);
    va_end(ap);
    return status;
}

void fattn_ctx_clear(fattn_context *ctx) { (ctx ? &ctx->msg : &thread_msg)->text[0] = '\0'; }

const char *fattn_error_message(const fattn_context *ctx) {
    return ctx ? ctx->msg.text : thread_msg.text;
}

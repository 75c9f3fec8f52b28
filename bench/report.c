/* Benchmark output (report.h). */
#include "report.h"

#include <string.h>

/* A CSV field: quoted, inner quotes doubled, line breaks (build logs) as spaces. */
static void csv_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void report_csv_header(FILE *f) {
    fprintf(f, "backend,device,device_name,dtype,batch,heads,seq,dim,causal,status,ms,tflops,max_"
               "err,err_rows,"
               "flash_bytes,naive_bytes,flash_measured_bytes,naive_ms,naive_tflops,naive_measured_"
               "bytes,clock,note\n");
}

void report_csv(FILE *f, const bench_result *r) {
    const bench_shape s = r->shape;
    fprintf(f, "%s,%d,", r->backend, r->device);
    csv_str(f, r->device_name);
    fprintf(f, ",%s,%lld,%lld,%lld,%lld,%d,%s,", bench_dtype_name(r->dtype), (long long)s.b,
            (long long)s.h, (long long)s.s, (long long)s.d, s.causal, r->status);
    if (strcmp(r->status, "ok") == 0) {
        fprintf(f, "%.4f,%.3f,", r->ms, r->tflops);
        if (r->max_err >= 0)
            fprintf(f, "%.3g,%d,", r->max_err, r->err_rows);
        else
            fprintf(f, ",,");
        fprintf(f, "%llu,%llu,", (unsigned long long)r->flash_bytes,
                (unsigned long long)r->naive_bytes);
        if (r->flash_measured >= 0) fprintf(f, "%lld", (long long)r->flash_measured);
        if (r->naive_ok) {
            fprintf(f, ",%.4f,%.3f,", r->naive_ms, r->naive_tflops);
            if (r->naive_measured >= 0) fprintf(f, "%lld", (long long)r->naive_measured);
        } else {
            fprintf(f, ",,,");
        }
        fprintf(f, ",%s,", r->clock);
        csv_str(f, r->naive_ok ? "" : r->naive_note);
    } else {
        fprintf(f, ",,,,%llu,%llu,,,,,,", (unsigned long long)r->flash_bytes,
                (unsigned long long)r->naive_bytes);
        csv_str(f, r->note);
    }
    fputc('\n', f);
    fflush(f);
}

void report_json(FILE *f, const bench_result *r) {
    const bench_shape s = r->shape;
    fprintf(f, "{\"backend\": \"%s\", \"device\": %d, \"device_name\": ", r->backend, r->device);
    json_str(f, r->device_name);
    fprintf(f,
            ", \"dtype\": \"%s\", \"batch\": %lld, \"heads\": %lld, \"seq\": %lld, \"dim\": %lld, "
            "\"causal\": %d, "
            "\"status\": \"%s\", \"flash_bytes\": %llu, \"naive_bytes\": %llu",
            bench_dtype_name(r->dtype), (long long)s.b, (long long)s.h, (long long)s.s,
            (long long)s.d, s.causal, r->status, (unsigned long long)r->flash_bytes,
            (unsigned long long)r->naive_bytes);
    if (strcmp(r->status, "ok") == 0) {
        fprintf(f, ", \"ms\": %.6g, \"tflops\": %.6g, \"clock\": \"%s\"", r->ms, r->tflops,
                r->clock);
        if (r->max_err >= 0)
            fprintf(f, ", \"max_err\": %.3g, \"err_rows\": %d", r->max_err, r->err_rows);
        if (r->flash_measured >= 0)
            fprintf(f, ", \"flash_measured_bytes\": %lld", (long long)r->flash_measured);
        if (r->naive_ok) {
            fprintf(f, ", \"naive_ms\": %.6g, \"naive_tflops\": %.6g", r->naive_ms,
                    r->naive_tflops);
            if (r->naive_measured >= 0)
                fprintf(f, ", \"naive_measured_bytes\": %lld", (long long)r->naive_measured);
        } else {
            fprintf(f, ", \"naive_note\": ");
            json_str(f, r->naive_note);
        }
    } else {
        fprintf(f, ", \"note\": ");
        json_str(f, r->note);
    }
    fprintf(f, "}\n");
    fflush(f);
}

static int same_row(const bench_result *a, const bench_result *b) {
    return a->dtype == b->dtype && a->shape.b == b->shape.b && a->shape.h == b->shape.h &&
           a->shape.s == b->shape.s && a->shape.d == b->shape.d &&
           a->shape.causal == b->shape.causal;
}

static int same_column(const bench_result *a, const bench_result *b) {
    return strcmp(a->backend, b->backend) == 0 && a->device == b->device;
}

/* One cell: "312.4 (2e-03)" or "skip" / "error". */
static void cell(char *buf, size_t len, const bench_result *r) {
    if (!r)
        snprintf(buf, len, "-");
    else if (strcmp(r->status, "ok") != 0)
        snprintf(buf, len, "%s", r->status);
    else if (r->max_err >= 0)
        snprintf(buf, len, "%.3g (%.0e)", r->tflops, r->max_err);
    else
        snprintf(buf, len, "%.3g", r->tflops);
}

void report_table(FILE *f, const bench_result *r, int n) {
    enum { MAXCOL = 16 };
    const bench_result *cols[MAXCOL];
    int nc = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int c = 0; c < nc; c++) seen |= same_column(cols[c], &r[i]);
        if (!seen && nc < MAXCOL) cols[nc++] = &r[i];
    }
    fprintf(f, "\nTFLOP/s (max |error| against the float64 reference on sampled rows); naive: the "
               "same backend's\n"
               "materialising baseline. Columns:\n");
    for (int c = 0; c < nc; c++)
        fprintf(f, "  [%d] %s %d: %s\n", c, cols[c]->backend, cols[c]->device,
                cols[c]->device_name);
    fprintf(f, "%-5s %6s %4s %3s %7s |", "dtype", "seq", "dim", "cau", "b x h");
    for (int c = 0; c < nc; c++) fprintf(f, " [%d] tiled %10s %7s |", c, "", "naive");
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        int first = 1;
        for (int k = 0; k < i && first; k++) first = !same_row(&r[k], &r[i]);
        if (!first) continue;
        char bh[24];
        snprintf(bh, sizeof bh, "%lldx%lld", (long long)r[i].shape.b, (long long)r[i].shape.h);
        fprintf(f, "%-5s %6lld %4lld %3d %7s |", bench_dtype_name(r[i].dtype),
                (long long)r[i].shape.s, (long long)r[i].shape.d, r[i].shape.causal, bh);
        for (int c = 0; c < nc; c++) {
            const bench_result *hit = NULL;
            for (int k = i; k < n && !hit; k++)
                if (same_row(&r[k], &r[i]) && same_column(&r[k], cols[c])) hit = &r[k];
            char tiled[48], naive[24] = "-";
            cell(tiled, sizeof tiled, hit);
            if (hit && hit->naive_ok)
                snprintf(naive, sizeof naive, "%.3g", hit->naive_tflops);
            else if (hit && strncmp(hit->naive_note, "impossible", 10) == 0)
                snprintf(naive, sizeof naive, "no room");
            else if (hit && strncmp(hit->naive_note, "skipped", 7) == 0)
                snprintf(naive, sizeof naive, "skipped");
            fprintf(f, " %-20s %7s |", tiled, naive);
        }
        fputc('\n', f);
    }
}

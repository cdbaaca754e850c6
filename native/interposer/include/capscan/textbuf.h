/* Bounded text building without stdio (the SDK-less build has none). */
#ifndef CAPSCAN_TEXTBUF_H
#define CAPSCAN_TEXTBUF_H

struct capscan_buf {
    char *data;
    unsigned long len;
    unsigned long cap;   /* bytes available, excluding the final NUL */
};

void capscan_buf_init(struct capscan_buf *buf, char *storage, unsigned long size);
void capscan_buf_char(struct capscan_buf *buf, char c);
void capscan_buf_str(struct capscan_buf *buf, const char *text);
/* Appends at most limit bytes of text; control characters become '?'. */
void capscan_buf_clean(struct capscan_buf *buf, const char *text, unsigned long limit);
void capscan_buf_json_str(struct capscan_buf *buf, const char *text);
void capscan_buf_uint(struct capscan_buf *buf, unsigned long long value);
void capscan_buf_int(struct capscan_buf *buf, long value);
int capscan_streq(const char *a, const char *b);

#endif

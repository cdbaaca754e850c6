/* Bounded, NUL-terminated text building; truncates instead of overflowing. */
#include "capscan/textbuf.h"

void capscan_buf_init(struct capscan_buf *buf, char *storage, unsigned long size)
{
    buf->data = storage;
    buf->len = 0;
    buf->cap = size ? size - 1 : 0;
    if (size)
        storage[0] = '\0';
}

void capscan_buf_char(struct capscan_buf *buf, char c)
{
    if (buf->len >= buf->cap)
        return;
    buf->data[buf->len++] = c;
    buf->data[buf->len] = '\0';
}

void capscan_buf_str(struct capscan_buf *buf, const char *text)
{
    while (text && *text)
        capscan_buf_char(buf, *text++);
}

void capscan_buf_clean(struct capscan_buf *buf, const char *text, unsigned long limit)
{
    for (; text && *text && limit; text++, limit--) {
        unsigned char c = (unsigned char)*text;
        capscan_buf_char(buf, (c < 0x20 || c == 0x7f) ? '?' : (char)c);
    }
}

void capscan_buf_json_str(struct capscan_buf *buf, const char *text)
{
    static const char hex[] = "0123456789abcdef";

    capscan_buf_char(buf, '"');
    for (; text && *text; text++) {
        unsigned char c = (unsigned char)*text;
        if (c == '"' || c == '\\') {
            capscan_buf_char(buf, '\\');
            capscan_buf_char(buf, (char)c);
        } else if (c < 0x20) {
            capscan_buf_str(buf, "\\u00");
            capscan_buf_char(buf, hex[c >> 4]);
            capscan_buf_char(buf, hex[c & 15]);
        } else {
            capscan_buf_char(buf, (char)c);
        }
    }
    capscan_buf_char(buf, '"');
}

void capscan_buf_uint(struct capscan_buf *buf, unsigned long long value)
{
    char digits[24];
    int n = 0;

    do {
        digits[n++] = (char)('0' + value % 10);
        value /= 10;
    } while (value);
    while (n)
        capscan_buf_char(buf, digits[--n]);
}

void capscan_buf_int(struct capscan_buf *buf, long value)
{
    if (value < 0) {
        capscan_buf_char(buf, '-');
        capscan_buf_uint(buf, (unsigned long long)(-(value + 1)) + 1);
    } else {
        capscan_buf_uint(buf, (unsigned long long)value);
    }
}

int capscan_streq(const char *a, const char *b)
{
    while (*a && *a == *b) {
        a++;
        b++;
    }
    return *a == *b;
}

/* Removing capscan's library from an injection variable (see scrub.h). */
#include "capscan/scrub.h"

static int is_separator(char c, const char *separators)
{
    for (; *separators; separators++)
        if (c == *separators)
            return 1;
    return 0;
}

static const char *file_name(const char *start, const char *end)
{
    const char *name = start, *p;

    for (p = start; p < end; p++)
        if (*p == '/')
            name = p + 1;
    return name;
}

/* Non-zero when [start, end) is exactly the string text. */
static int equals(const char *start, const char *end, const char *text)
{
    for (; start < end; start++, text++)
        if (*text != *start)
            return 0;
    return *text == '\0';
}

/* Non-zero when the entry [start, end) names capscan's library (see scrub.h). */
static int is_capscan(const char *start, const char *end, const char *self)
{
    const char *name = file_name(start, end), *p;
    const char *stem = CAPSCAN_LIBRARY_STEM;

    if (self && *self) {
        const char *self_name = self;
        for (p = self; *p; p++)
            if (*p == '/')
                self_name = p + 1;
        if (equals(start, end, self) || (*self_name && equals(name, end, self_name)))
            return 1;
    }
    for (p = name; *stem; p++, stem++)
        if (p >= end || *p != *stem)
            return 0;
    return 1;
}

int capscan_scrub_list(const char *list, const char *separators, const char *self, char *out,
                       unsigned long size)
{
    unsigned long len = 0;
    int removed = 0;
    const char *start, *end;

    if (!out || !size)
        return -1;
    out[0] = '\0';
    if (!list)
        return 0;
    for (start = list; *start;) {
        for (end = start; *end && !is_separator(*end, separators); end++)
            ;
        if (end > start) {
            if (is_capscan(start, end, self)) {
                removed++;
            } else {
                unsigned long need = (unsigned long)(end - start) + (len ? 1 : 0);
                if (len + need + 1 > size) {
                    out[0] = '\0';
                    return -1;
                }
                if (len)
                    out[len++] = separators[0];
                while (start < end)
                    out[len++] = *start++;
                out[len] = '\0';
            }
        }
        start = *end ? end + 1 : end;
    }
    return removed;
}

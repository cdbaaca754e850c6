/* The opt-in scrub (CAPSCAN_INTERPOSER_SCRUB=1): once the library is loaded,
 * remove it from the injection variable so the process's children do not
 * inherit it.  Off by default, because some targets need their children
 * injected (ollama's runner is a child of `ollama serve`).
 *
 * Freestanding C, like the policy core. */
#ifndef CAPSCAN_SCRUB_H
#define CAPSCAN_SCRUB_H

#define CAPSCAN_LIBRARY_STEM "libcapscan_interposer"

/* Copy the entries of list (separated by any character of separators) to
 * out, joined by the first separator, leaving out every entry that names this
 * library: its file name starts with CAPSCAN_LIBRARY_STEM, or the entry is
 * self (the path the loader reports for this very image; may be 0) or has
 * self's file name, so a copy injected under another name (--dylib) is
 * dropped too.  Returns how many entries were removed, or -1 (out untouched
 * except for an empty string) when out is too small. */
int capscan_scrub_list(const char *list, const char *separators, const char *self, char *out,
                       unsigned long size);

#endif

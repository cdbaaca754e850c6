/* A minimal macOS executable for the Mach-O reader's fixtures.  With
 * CAPSCAN_FIXTURE_RESTRICT it carries the __RESTRICT,__restrict section that
 * makes dyld ignore DYLD_* variables. */
#if defined(CAPSCAN_FIXTURE_RESTRICT)
__attribute__((used, section("__RESTRICT,__restrict"))) static const char restrict_marker[1] = {0};
#endif

int main(void)
{
    return 0;
}

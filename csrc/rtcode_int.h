/*
 * rtcode_int.h - "this translation unit's machine code is the runtime's".
 * Included FIRST by every csrc/ source file (C and arch/ assembly), before any
 * other header; tested (test/test_codemap.sh).
 *
 * Model: the involuntary preemption path must never interrupt the runtime
 * itself (preempt.c). Which code is the runtime's is decided here, by
 * construction, not from file names, symbol names or link order: every
 * runtime object brackets each text section the compilers use with two
 * assembler-local labels (the first one in subsection 0, emitted before any
 * function because top-level asm precedes functions, the last one in
 * subsection 8191, which the assembler lays out after all the code of that
 * section), and records the pair with its file name in the data section
 * `xtc_rtmap`. The linker concatenates those records whatever the order of
 * the objects, and defines __start_xtc_rtmap/__stop_xtc_rtmap (GNU ld, gold
 * and lld all do for a section whose name is a C identifier), so the map is
 * exactly the runtime's code in meson, shared-library and cgo builds,
 * stripped or not, static or dynamic.
 *
 * Invariants: the label pairs cover every executable section of every
 * runtime object (test_codemap.sh fails on an executable section outside
 * them, e.g. after -ffunction-sections); a file without this include has
 * no record (the same test fails, naming it).
 *
 * Rejected: a list of runtime file names matched against the ELF symbol
 * table (a user's own loop_timer.c was never preempted, a forgotten file always
 * was, and stripped binaries have no table); begin/end marker objects
 * placed by file-name order (an object sorting outside the pair silently
 * became preemptible, and cold/startup text sections lie outside anyway);
 * a section attribute on every function (GCC has no pragma for a default
 * text section, and one forgotten attribute is a silent hole).
 */
#ifndef XTC_RTCODE_INT_H
#define XTC_RTCODE_INT_H

/* GCC names cold/hot/startup/exit text ".text.unlikely" etc.; clang adds a
 * trailing dot when functions share a section. One record per section. */
#define XTC__RTCODE_SECTIONS(X)                                              \
	X(".text", "t") X(".text.unlikely", "u") X(".text.unlikely.", "u2")     \
	X(".text.hot", "h") X(".text.hot.", "h2") X(".text.startup", "s")       \
	X(".text.startup.", "s2") X(".text.exit", "e") X(".text.exit.", "e2")

#ifdef __ASSEMBLER__

/* arch/ assembly files put code only in .text: one record, begin here, end at the
 * end of the file (subsection 8191). */
	.pushsection .rodata
.Lxtc_rtcode_name:
	.asciz __BASE_FILE__
	.popsection
	.pushsection .text,"ax",%progbits
.Lxtc_rtcode_lo_t:
	.subsection 8191
.Lxtc_rtcode_hi_t:
	.popsection
	.pushsection xtc_rtmap,"aw",%progbits
	.balign 8
	.quad .Lxtc_rtcode_lo_t, .Lxtc_rtcode_hi_t, .Lxtc_rtcode_name
	.popsection

#else

#define XTC__RTCODE_ONE(sec, tag)                                             \
	".pushsection " sec ",\"ax\",%progbits\n"                                \
	".Lxtc_rtcode_lo_" tag ":\n"                                             \
	".subsection 8191\n"                                                     \
	".Lxtc_rtcode_hi_" tag ":\n"                                             \
	".popsection\n"                                                          \
	".pushsection xtc_rtmap,\"aw\",%progbits\n"                              \
	".balign 8\n"                                                            \
	".quad .Lxtc_rtcode_lo_" tag ", .Lxtc_rtcode_hi_" tag                    \
	", .Lxtc_rtcode_name\n"                                                  \
	".popsection\n"

__asm__(".pushsection .rodata\n"
        ".Lxtc_rtcode_name: .asciz \"" __BASE_FILE__ "\"\n"
        ".popsection\n"
        XTC__RTCODE_SECTIONS(XTC__RTCODE_ONE));

/* One record of xtc_rtmap: [lo, hi) is code of the runtime file `file`. */
typedef struct xtc__rtcode {
	const char *lo, *hi;
	const char *file;
} xtc__rtcode_t;

#endif /* __ASSEMBLER__ */
#endif /* XTC_RTCODE_INT_H */

package xtc

// DownReasonNoproc is the reason of the DOWN a monitor delivers at once
// when its target was already gone (XTC_DOWN_NOPROC): benign, not a crash.
const DownReasonNoproc = -100000

// DownIsNoproc reports whether a DOWN reason is DownReasonNoproc
// (xtc_down_is_noproc): the monitored proc had exited before the monitor
// was set, which a supervisor treats as "already gone", not as a failure.
func DownIsNoproc(reason int) bool { return reason == DownReasonNoproc }

package main

/*
void xb_dbg(int mode, long n);
void xb_dbg_hog(int mode);
*/
import "C"

func xbDbg(m, n int) { C.xb_dbg(C.int(m), C.long(n)) }

func xbDbgHog(m int) { C.xb_dbg_hog(C.int(m)) }

package main

/*
void xb_dbg(int mode, long n);
*/
import "C"

func xbDbg(m, n int) { C.xb_dbg(C.int(m), C.long(n)) }

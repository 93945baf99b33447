// Process-wide tuning of glibc's allocator for the commands that load a whole run, analyse
// it and exit (report, export, whatif, diff, import).
#pragma once

namespace grademl {

// Keeps freed memory in the heap for the next allocation instead of handing it back to the
// kernel: blocks up to 32 MiB (glibc's largest threshold) come from the heap rather than
// their own mappings, and the heap's top is never trimmed. A 1M-phase report otherwise
// faulted in fresh zeroed pages for each large vector the analyses build and free, one after
// the other: 296k page faults and a quarter of its CPU, 184k (each page once) with this.
// Not for long-lived commands (`run`, `agent`), whose memory should go back once freed.
void KeepFreedMemoryForReuse();

}  // namespace grademl

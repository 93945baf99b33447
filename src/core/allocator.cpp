#include "core/allocator.h"

#include <malloc.h>

#include "core/sanitizers.h"

namespace grademl {

void KeepFreedMemoryForReuse() {
#if defined(__GLIBC__) && !GRADEML_ADDRESS_SANITIZER && !GRADEML_THREAD_SANITIZER
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

}  // namespace grademl

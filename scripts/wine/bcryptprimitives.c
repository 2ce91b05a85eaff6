/* A stand-in for Windows' bcryptprimitives.dll, for running Spindle's
 * Windows build under Wine 8, which lacks it. Rust's standard library
 * takes its random bytes from ProcessPrng there; this one answers with
 * advapi32's RtlGenRandom (SystemFunction036). Test use only: it is never
 * shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}

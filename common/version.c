// version.c - the library's version, for programs and bindings that load
// it at run time (pstrain.h).
#include "pstrain.h"

#include "build/version.h"

const char *pt_version(void)
{
	return PT_VERSION;
}

int pt_api_version(void)
{
	return PT_API_VERSION;
}

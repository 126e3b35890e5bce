/* export.c - see export.h. */
#include <string.h>

#include "err.h"
#include "export.h"
#include "safetensors.h"

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

int infer_export_format(const char *path, const char *fmt, enum infer_export_format *out,
		      const char **why)
{
	if (fmt) {
		if (!strcmp(fmt, "onnx"))
			*out = INFER_EXPORT_ONNX;
		else if (!strcmp(fmt, "safetensors"))
			*out = INFER_EXPORT_SAFETENSORS;
		else
			return *why = "--export-format: the formats are onnx and safetensors", -1;
		return 0;
	}
	if (ends_with(path, ".onnx"))
		*out = INFER_EXPORT_ONNX;
	else if (ends_with(path, ".safetensors"))
		*out = INFER_EXPORT_SAFETENSORS;
	else
		return *why = "--export: name the file .onnx or .safetensors, or give "
			      "--export-format onnx|safetensors",
		       -1;
	return 0;
}

int infer_export(const struct ncf_model *m, const char *path, enum infer_export_format f)
{
	if (f == INFER_EXPORT_SAFETENSORS)
		return ncf_safetensors_write(m, path);
	return infer_export_onnx(m, path);
}

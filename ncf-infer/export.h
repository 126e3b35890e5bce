/*
 * export.h - ncf-infer --export: a model out of ncf, as ONNX for serving
 * (Triton, ONNX Runtime) or as safetensors with the names of NVIDIA's
 * PyTorch NeuMF state_dict.  See ncf-infer(1), EXPORT.
 */
#ifndef NCF_INFER_EXPORT_H
#define NCF_INFER_EXPORT_H

#include <stdio.h>

#include "model.h"

enum infer_export_format {
	INFER_EXPORT_ONNX = 1,
	INFER_EXPORT_SAFETENSORS = 2,
};

/*
 * The format of an export to path: fmt (--export-format, may be NULL)
 * when given, else the extension (.onnx, .safetensors).  Returns 0, or -1
 * with *why set to a message for a usage error.
 */
int infer_export_format(const char *path, const char *fmt, enum infer_export_format *out,
		      const char **why);

/*
 * Write m to path (temporary name, then renamed; "-" is stdout, never a
 * terminal).  ONNX needs m's original ids.  Returns 0, -1 (reported) or -3
 * when the format is not built in (reported; exit 3).
 */
int infer_export(const struct ncf_model *m, const char *path, enum infer_export_format f);

/* The ONNX writer (export_onnx.c); the same contract. */
int infer_export_onnx(const struct ncf_model *m, const char *path);
/* The -vV line: protobuf-c's version, or what the build lacked. */
void infer_export_describe(FILE *out);

#endif

// The roarfast._C extension module. Importing it runs the op registrations in csrc/ops;
// it defines no Python functions of its own (ops are reached through torch.ops.roarfast).
#include <Python.h>
#include <torch/library.h>

// The namespace is declared once here; every op adds its schema with TORCH_LIBRARY_FRAGMENT.
TORCH_LIBRARY(roarfast, m) {}

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

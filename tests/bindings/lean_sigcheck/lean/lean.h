/* SIGNATURE CHECK ONLY -- NOT Lean's lean.h and NOT a test of behaviour.
 *
 * There is no Lean toolchain on the build machines (tests/bindings/meson.build). This file
 * declares, with the parameter and result types of Lean's include/lean/lean.h (v4.22.0), exactly
 * the lean.h functions and types that bindings/lean/c/tlrt_lean_shim.c uses, so that gcc can
 * check the shim's C against them (-fsyntax-only -Wall -Wextra -Werror): argument counts and
 * types, const-correctness of the casts to the library's prototypes, unused variables. It has no
 * definitions: nothing here runs, and it says nothing about reference counting or the IO
 * calling convention, which were reviewed by hand (bindings/lean/README.md).
 * In lean.h most of these are `static inline`; declaring them extern changes nothing for a
 * syntax check. */
#ifndef TLRT_LEAN_SIGCHECK_H
#define TLRT_LEAN_SIGCHECK_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEAN_EXPORT __attribute__((visibility("default")))

typedef struct {
  int m_rc;
  unsigned m_cs_sz : 16;
  unsigned m_other : 8;
  unsigned m_tag : 8;
} lean_object;

typedef lean_object *lean_obj_arg;    /* owned argument */
typedef lean_object *b_lean_obj_arg;  /* borrowed argument */
typedef lean_object *lean_obj_res;    /* owned result */
typedef lean_object *b_lean_obj_res;  /* borrowed result */

typedef void (*lean_external_finalize_proc)(void *);
typedef void (*lean_external_foreach_proc)(void *, b_lean_obj_arg);
typedef struct {
  lean_external_finalize_proc m_finalize;
  lean_external_foreach_proc m_foreach;
} lean_external_class;

LEAN_EXPORT lean_external_class *lean_register_external_class(lean_external_finalize_proc,
                                                              lean_external_foreach_proc);
lean_object *lean_alloc_external(lean_external_class *cls, void *data);
void *lean_get_external_data(b_lean_obj_arg a);

lean_obj_res lean_io_result_mk_ok(lean_obj_arg a);
lean_obj_res lean_io_result_mk_error(lean_obj_arg e);
LEAN_EXPORT lean_obj_res lean_mk_io_user_error(lean_obj_arg str);
LEAN_EXPORT lean_obj_res lean_mk_string(char const *s);

lean_object *lean_box(size_t n);
bool lean_is_scalar(lean_object *o);
lean_obj_res lean_box_uint32(uint32_t v);
lean_obj_res lean_box_uint64(uint64_t v);
lean_obj_res lean_box_usize(size_t v);
uint32_t lean_unbox_uint32(b_lean_obj_arg o);
uint64_t lean_unbox_uint64(b_lean_obj_arg o);

lean_object *lean_alloc_ctor(unsigned tag, unsigned num_objs, unsigned scalar_sz);
void lean_ctor_set(b_lean_obj_arg o, unsigned i, lean_obj_arg v);
b_lean_obj_res lean_ctor_get(b_lean_obj_arg o, unsigned i);

size_t lean_array_size(b_lean_obj_arg a);
lean_object *lean_array_get_core(b_lean_obj_arg a, size_t i);
lean_obj_res lean_mk_empty_array_with_capacity(b_lean_obj_arg capacity);
LEAN_EXPORT lean_object *lean_array_push(lean_obj_arg a, lean_obj_arg v);

lean_obj_res lean_alloc_sarray(unsigned elem_size, size_t size, size_t capacity);
size_t lean_sarray_size(b_lean_obj_arg o);
uint8_t *lean_sarray_cptr(lean_object *o);
double *lean_float_array_cptr(b_lean_obj_arg a);

void lean_dec_ref(lean_object *o);

/* Strings: the UTF-8 bytes, NUL-terminated; lean_string_size counts the bytes and that NUL. */
char const *lean_string_cstr(b_lean_obj_arg o);
size_t lean_string_size(b_lean_obj_arg o);

#endif

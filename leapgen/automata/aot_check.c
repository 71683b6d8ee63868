/* Argument checks compiled into leapgen's kernel library (leapgen/automata/aot_build.py).
 *
 * numba's pycc converts an argument to an array type by checking only that it is an array of the same
 * item size (its conversion then copies as many dimensions as the array has, whatever the type's
 * count), and to an integer type by anything int() takes. The builder calls these first, so that the
 * library takes exactly what numba's dispatcher would type as the compiled signature; anything else
 * raises TypeError, and leapgen.automata.aot turns that into a call of numba's JIT.
 */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <Python.h>
#include <numpy/arrayobject.h>

static int numpy_ready = 0;

static int ensure_numpy(void)
{
    if (!numpy_ready) {
        if (_import_array() < 0) {
            PyErr_Clear();
            return 0;
        }
        numpy_ready = 1;
    }
    return 1;
}

/* 1 if obj is an ndarray (or subclass) of this dtype kind ('i', 'u', 'f', 'b') and item size, dimension
 * count, native byte order and alignment, C-contiguous where contiguous != 0 and writable where
 * writeable != 0; else 0. Needs the GIL. */
int leapgen_array_matches(PyObject *obj, int kind, int itemsize, int ndim, int contiguous, int writeable)
{
    if (!ensure_numpy() || !PyArray_Check(obj))
        return 0;
    PyArrayObject *array = (PyArrayObject *)obj;
    PyArray_Descr *descr = PyArray_DESCR(array);
    int flags = PyArray_FLAGS(array);
    return PyArray_NDIM(array) == ndim && descr->kind == kind && PyArray_ITEMSIZE(array) == itemsize
        && PyArray_ISNBO(descr->byteorder)
        && (flags & NPY_ARRAY_ALIGNED) && (!contiguous || (flags & NPY_ARRAY_C_CONTIGUOUS))
        && (!writeable || (flags & NPY_ARRAY_WRITEABLE));
}

/* 1 if obj is an integer (a Python int or bool, a numpy integer scalar: what has __index__, arrays
 * excepted; floats are not) whose value fits an integer of this many bits and signedness; else 0. numba's
 * own conversion truncates a value that does not fit. Needs the GIL. */
int leapgen_integer_fits(PyObject *obj, int bits, int is_signed)
{
    if (!ensure_numpy() || !PyIndex_Check(obj) || PyArray_Check(obj))
        return 0;
    PyObject *value = PyNumber_Index(obj);
    if (value == NULL) {
        PyErr_Clear();
        return 0;
    }
    int fits;
    if (is_signed) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        long long limit = bits >= 64 ? 0 : (1LL << (bits - 1));
        fits = !overflow && !(v == -1 && PyErr_Occurred()) && (bits >= 64 || (v >= -limit && v < limit));
    } else {
        unsigned long long v = PyLong_AsUnsignedLongLong(value);
        fits = !(v == (unsigned long long)-1 && PyErr_Occurred()) && (bits >= 64 || v < (1ULL << bits));
    }
    PyErr_Clear();
    Py_DECREF(value);
    return fits;
}

/* Raise TypeError(message). numba's pycc code cannot raise it itself: in a pycc module its reference to
 * PyExc_TypeError resolves to the address of CPython's variable rather than to the class it holds (numba's
 * JIT maps the name to the class), so pycc's own conversion errors crash (numba 0.68). Needs the GIL. */
void leapgen_type_error(const char *message)
{
    PyErr_SetString(PyExc_TypeError, message);
}

/* numpy's ndarray type (borrowed), for the library's boxing of the arrays its kernels return: pycc's
 * own code unpickles the type at every array it returns (numba 0.68: ~1-2 us an array, and a reference
 * leaked each time). Needs the GIL. */
PyObject *leapgen_ndarray_type(void)
{
    return ensure_numpy() ? (PyObject *)&PyArray_Type : NULL;
}

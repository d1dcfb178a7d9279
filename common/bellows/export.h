/* export - symbol visibility for the installed API.
 *
 * libbellows is built with -fvisibility=hidden because it lives inside
 * training processes (PyTorch among them): only symbols marked
 * BELLOWS_EXPORT are part of the ABI, everything else stays private.
 */
#ifndef BELLOWS_EXPORT_H
#define BELLOWS_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define BELLOWS_EXPORT __attribute__((visibility("default")))
#else
#define BELLOWS_EXPORT
#endif

#endif /* BELLOWS_EXPORT_H */

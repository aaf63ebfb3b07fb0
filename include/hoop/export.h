// HOOP_API marks what libhoop.so and libhoop_dp.so export. Both are built with
// -fvisibility=hidden: a symbol without the mark stays inside its library, so the libraries'
// internals (hoop::detail and the layers under the API) are not part of their ABI.
#pragma once

// HOOP_LOCAL keeps a member of an exported class (its implementation's type) inside.
#if defined(__GNUC__) || defined(__clang__)
#define HOOP_API __attribute__((visibility("default")))
#define HOOP_LOCAL __attribute__((visibility("hidden")))
#else
#define HOOP_API
#define HOOP_LOCAL
#endif

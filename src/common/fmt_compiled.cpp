// SPDX-License-Identifier: MIT
//
// fmt compiled once. Debian ships fmt as headers and a shared library only, and a
// self-contained tfslurm (TFSLURM_SELF_CONTAINED) may not need libfmt.so where it runs. fmt's
// header-only mode would compile fmt's implementation again in every translation unit that
// formats (about 4 s each); instead, the project includes fmt's headers in their compiled-library
// mode and this one file defines what they declare: the functions of format-inl.h, and the
// function templates that the headers declare but leave to the library (the instantiations
// below, for the char type tfslurm uses). Not compiled when fmt is linked as a library.

#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {

// Floating-point formatting (format.h declares to_decimal; format-inl.h defines it).
template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

// Locale-aware formatting ({:L}): the locale reference and the separators it reads.
template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;

#if FMT_VERSION >= 100000 && FMT_VERSION < 110000
// fmt 10 (Debian 13) leaves the formatting loop itself to the library.
template FMT_API void
vformat_to(buffer<char>&, string_view, typename vformat_args<>::type, locale_ref);
#endif

} // namespace detail
FMT_END_NAMESPACE

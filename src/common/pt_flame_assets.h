/*
 * pt_flame_assets.h - the flame graph page's template, style and script
 * (src/common/flame/flame.html, flame.css, flame.js), compiled in: the C
 * file defining these is generated at build time by
 * src/common/flame/embed.py (a meson custom_target), which also checks that
 * the script cannot end its <script> element ("</script") nor the style its
 * <style> element. The template holds each of the markers @TITLE@, @CSS@,
 * @DATA@ and @JS@ exactly once (embed.py checks that too); pt_flame.c fills
 * them.
 */
#ifndef PT_FLAME_ASSETS_H
#define PT_FLAME_ASSETS_H

#include <stddef.h>

extern const char pt_flame_asset_html[];
extern const size_t pt_flame_asset_html_len;
extern const char pt_flame_asset_css[];
extern const size_t pt_flame_asset_css_len;
extern const char pt_flame_asset_js[];
extern const size_t pt_flame_asset_js_len;

#endif

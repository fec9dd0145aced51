;; Finds the end of a long JSON string, object or array, 16 bytes at a time (WebAssembly SIMD).
;; skip.ts copies the text into this module's memory and falls back to its own JavaScript scan
;; when WebAssembly is unavailable. Assembled into skip-wasm.ts by `make wasm` (tools/wasm.ts);
;; a test checks that the committed bytes are this file's.
;;
;; Semantics are those of the JavaScript scan in skip.ts, which a test compares on random input:
;; strings are followed through their escapes (a backslash hides the byte after it), brackets
;; outside strings must pair up, at most 512 containers may be open; nothing else is checked.
(module
  ;; [0, 512): the opening byte of each open container. [1024, 1024 + 256 KiB): the text.
  ;; 16 bytes of slack follow it: a block read may run past the end (those bytes are masked).
  (memory (export "memory") 5)

  ;; $i is the offset of the value's first byte (a quote, `{` or `[`) and $n the end of the text.
  ;; Returns the offset just past the value, or -1 when the text ends first or is malformed.
  (func (export "skip") (param $i i32) (param $n i32) (result i32)
    (local $block i32) (local $skip i32) (local $mask i32) (local $p i32) (local $c i32)
    (local $depth i32) (local $inString i32) (local $v v128) (local $folded v128) (local $left i32)
    (local.set $block (local.get $i))
    ;; Bytes before $skip are not looked at: the value's start, then the byte after a backslash.
    (local.set $skip (local.get $i))
    (block $fail
      (loop $blocks
        (br_if $fail (i32.ge_u (local.get $block) (local.get $n)))
        (local.set $v (v128.load (local.get $block)))
        ;; `[` | 0x20 is `{` and `]` | 0x20 is `}`: two comparisons find all four brackets.
        (local.set $folded (v128.or (local.get $v) (i8x16.splat (i32.const 0x20))))
        ;; One bit per byte that may matter: quote, backslash, bracket.
        (local.set $mask (i8x16.bitmask
          (v128.or
            (v128.or (i8x16.eq (local.get $v) (i8x16.splat (i32.const 0x22)))
                     (i8x16.eq (local.get $v) (i8x16.splat (i32.const 0x5c))))
            (v128.or (i8x16.eq (local.get $folded) (i8x16.splat (i32.const 0x7b)))
                     (i8x16.eq (local.get $folded) (i8x16.splat (i32.const 0x7d)))))))
        (local.set $left (i32.sub (local.get $n) (local.get $block)))
        (if (i32.lt_u (local.get $left) (i32.const 16))
          (then (local.set $mask (i32.and (local.get $mask)
            (i32.sub (i32.shl (i32.const 1) (local.get $left)) (i32.const 1))))))
        (if (i32.gt_u (local.get $skip) (local.get $block))
          (then (local.set $mask (i32.and (local.get $mask)
            (i32.xor (i32.sub (i32.shl (i32.const 1) (i32.sub (local.get $skip) (local.get $block))) (i32.const 1))
                     (i32.const -1))))))
        ;; The marked bytes in order, lowest bit first.
        (block $next
          (loop $bits
            (br_if $next (i32.eqz (local.get $mask)))
            (local.set $p (i32.add (local.get $block) (i32.ctz (local.get $mask))))
            (local.set $mask (i32.and (local.get $mask) (i32.sub (local.get $mask) (i32.const 1))))
            (br_if $bits (i32.lt_u (local.get $p) (local.get $skip)))
            (local.set $c (i32.load8_u (local.get $p)))
            (if (local.get $inString)
              (then
                (if (i32.eq (local.get $c) (i32.const 0x22))
                  (then
                    (local.set $inString (i32.const 0))
                    (if (i32.eqz (local.get $depth))
                      (then (return (i32.add (local.get $p) (i32.const 1)))))))
                (if (i32.eq (local.get $c) (i32.const 0x5c))
                  (then (local.set $skip (i32.add (local.get $p) (i32.const 2)))))
                (br $bits)))
            (if (i32.eq (local.get $c) (i32.const 0x22))
              (then
                (local.set $inString (i32.const 1))
                (br $bits)))
            (if (i32.eq (i32.or (local.get $c) (i32.const 0x20)) (i32.const 0x7b))
              (then
                (br_if $fail (i32.eq (local.get $depth) (i32.const 512)))
                (i32.store8 (local.get $depth) (local.get $c))
                (local.set $depth (i32.add (local.get $depth) (i32.const 1)))
                (br $bits)))
            (if (i32.eq (i32.or (local.get $c) (i32.const 0x20)) (i32.const 0x7d))
              (then
                (br_if $fail (i32.eqz (local.get $depth)))
                (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))
                ;; `{` + 2 is `}` and `[` + 2 is `]`.
                (br_if $fail (i32.ne (i32.load8_u (local.get $depth)) (i32.sub (local.get $c) (i32.const 2))))
                (if (i32.eqz (local.get $depth))
                  (then (return (i32.add (local.get $p) (i32.const 1)))))))
            (br $bits)))
        (local.set $block (i32.add (local.get $block) (i32.const 16)))
        (br $blocks)))
    (i32.const -1)))

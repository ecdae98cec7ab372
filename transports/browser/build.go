package browser

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Files holds the extension's scripts, pages and manifest (ext/): what
// Build writes besides the WebAssembly, wasm_exec.js and the icons.
//
//go:embed ext
var Files embed.FS

// WasmPackage is the import path of the parser and verifier that Build
// compiles to WebAssembly.
const WasmPackage = "github.com/crosstalk-go/crosstalk/transports/browser/wasm"

// BuildOptions change Build; nil means defaults.
type BuildOptions struct {
	// Go is the go command; "" means "go" from PATH.
	Go string
	// Dir is the directory the go command runs in: inside this module.
	// "" means the current directory.
	Dir string
}

// Build writes the unpacked extension into dir (created if needed; files
// of an earlier build are replaced): the manifest, scripts and pages of
// Files, crosstalk.wasm compiled from WasmPackage with GOOS=js
// GOARCH=wasm, the wasm_exec.js of the same Go installation, and the
// icons. It needs the go command and this module's source.
func Build(ctx context.Context, dir string, opts *BuildOptions) error {
	if opts == nil {
		opts = &BuildOptions{}
	}
	goCmd := opts.Go
	if goCmd == "" {
		goCmd = "go"
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("browser: build dir: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "icons"), 0o755); err != nil {
		return fmt.Errorf("browser: build dir: %w", err)
	}
	err = fs.WalkDir(Files, "ext", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := Files.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, strings.TrimPrefix(p, "ext/")), data, 0o644)
	})
	if err != nil {
		return fmt.Errorf("browser: writing the extension's files: %w", err)
	}
	for _, size := range []int{16, 32, 48, 128} {
		if err := os.WriteFile(filepath.Join(dir, "icons", fmt.Sprintf("%d.png", size)), Icon(size), 0o644); err != nil {
			return fmt.Errorf("browser: writing icons: %w", err)
		}
	}

	run := func(env []string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir = opts.Dir
		cmd.Env = append(os.Environ(), env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("%s %s: %w: %s", goCmd, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	root, err := run(nil, "env", "GOROOT")
	if err != nil {
		return fmt.Errorf("browser: finding wasm_exec.js: %w", err)
	}
	execJS, err := wasmExec(root)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "wasm_exec.js"), execJS, 0o644); err != nil {
		return fmt.Errorf("browser: %w", err)
	}
	if _, err := run([]string{"GOOS=js", "GOARCH=wasm", "CGO_ENABLED=0"}, "build", "-trimpath", "-ldflags=-s -w",
		"-o", filepath.Join(dir, "crosstalk.wasm"), WasmPackage); err != nil {
		return fmt.Errorf("browser: compiling the parser to WebAssembly (run from inside the crosstalk module): %w", err)
	}
	return nil
}

// wasmExec reads the wasm_exec.js of the Go installation at root: lib/wasm
// since Go 1.24, misc/wasm before.
func wasmExec(root string) ([]byte, error) {
	for _, p := range []string{"lib/wasm/wasm_exec.js", "misc/wasm/wasm_exec.js"} {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("browser: %w", err)
		}
	}
	return nil, fmt.Errorf("browser: wasm_exec.js is not in the Go installation at %s", root)
}

// Icon returns the extension's icon as a size×size PNG: two speech
// bubbles, blue and green, on a transparent background.
func Icon(size int) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	blue := color.NRGBA{0x25, 0x63, 0xeb, 0xff}
	green := color.NRGBA{0x15, 0x80, 0x3d, 0xff}
	s := float64(size)
	bubble := func(cx, cy, rx, ry float64, c color.NRGBA, tailLeft bool) {
		for y := 0; y < size; y++ {
			for x := 0; x < size; x++ {
				fx, fy := (float64(x)+0.5-cx)/rx, (float64(y)+0.5-cy)/ry
				in := fx*fx+fy*fy <= 1
				// A small tail under the bubble.
				ty := float64(y) + 0.5 - (cy + ry*0.7)
				tx := float64(x) + 0.5 - cx
				if !tailLeft {
					tx = -tx
				}
				if ty >= 0 && ty < ry*0.5 && tx < -rx*0.2 && tx > -rx*0.2-ry*0.5+ty {
					in = true
				}
				if in {
					img.SetNRGBA(x, y, c)
				}
			}
		}
	}
	bubble(s*0.38, s*0.36, s*0.34, s*0.26, blue, true)
	bubble(s*0.62, s*0.62, s*0.34, s*0.26, green, false)
	var b bytes.Buffer
	png.Encode(&b, img) // writing to memory cannot fail
	return b.Bytes()
}

package folder

// WithoutNotify makes f run on its periodic rescan alone, as it does when
// fsnotify cannot watch the directory.
func WithoutNotify(f *Folder) *Folder {
	f.noNotify = true
	return f
}

package folder

// WithoutNotify makes f run on its periodic rescan alone, as it does when
// fsnotify cannot watch the directory.
func WithoutNotify(f *Folder) *Folder {
	f.noNotify = true
	return f
}

// Looks reports how many times f's Receive looked at a pending file.
func Looks(f *Folder) int64 { return f.looks.Load() }

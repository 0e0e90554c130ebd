package diskimage

import "testing"

func TestIsMountPoint(t *testing.T) {
	if ok, err := IsMountPoint("/proc"); err != nil || !ok {
		t.Errorf("IsMountPoint(/proc) = %v, %v; want true", ok, err)
	}
	if ok, err := IsMountPoint(t.TempDir()); err != nil || ok {
		t.Errorf("IsMountPoint(a new directory) = %v, %v; want false", ok, err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a\040b`: "/a b", `/plain`: "/plain", `/tab\011x`: "/tab\tx", `/odd\04`: `/odd\04`} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

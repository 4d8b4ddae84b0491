package wiretest

import "reflect"

// Zero lists, by path, the exported fields of the struct v (or what it
// points to), and of the structs, pointers, interfaces and slices in it,
// that hold their zero value: the domain side of Unset, for a conversion
// from a Filled message. Of a slice, only the first element is looked
// into.
func Zero(v any) []string {
	return zero(reflect.ValueOf(v), "", false)
}

// ZeroAll is Zero over unexported fields too: for a package's own
// domain values, read in its tests.
func ZeroAll(v any) []string {
	return zero(reflect.ValueOf(v), "", true)
}

func zero(v reflect.Value, path string, all bool) []string {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return []string{path}
		}
		v = v.Elem()
	}
	switch {
	case v.Kind() == reflect.Struct && v.Type().PkgPath() != "time":
		var out []string
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() || all {
				out = append(out, zero(v.Field(i), path+"."+f.Name, all)...)
			}
		}
		return out
	case v.Kind() == reflect.Slice && v.Len() > 0 && v.Type().Elem().Kind() != reflect.Uint8:
		return zero(v.Index(0), path+"[0]", all)
	case v.IsZero():
		return []string{path}
	}
	return nil
}

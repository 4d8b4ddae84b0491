package wiretest

import "google.golang.org/protobuf/reflect/protoreflect"

// Fill sets every field of m and of the messages in it to a value that is
// not zero (a list gets one element; of a oneof, the first member), for a
// conversion from the wire that must read every field. It returns m.
func Fill[M interface{ ProtoReflect() protoreflect.Message }](m M) M {
	fill(m.ProtoReflect(), 0)
	return m
}

func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() && m.WhichOneof(o) != nil {
			continue
		}
		switch {
		case fd.IsMap():
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Message() != nil {
				if depth < 4 {
					e := l.NewElement()
					fill(e.Message(), depth+1)
					l.Append(e)
				}
			} else {
				l.Append(scalar(fd, i))
			}
		case fd.Message() != nil:
			if depth < 4 {
				fill(m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, scalar(fd, i))
		}
	}
}

// scalar is a value for field fd, the i-th of its message, that is not
// zero and differs from field to field.
func scalar(fd protoreflect.FieldDescriptor, i int) protoreflect.Value {
	n := int64(i + 1)
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(n)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(n) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(n) + 0.5)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(string(fd.Name()))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(fd.Name()))
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(vals.Len() - 1).Number())
	}
	panic("wiretest: unknown kind " + fd.Kind().String())
}

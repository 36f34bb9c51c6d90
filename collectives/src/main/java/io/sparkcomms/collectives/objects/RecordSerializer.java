package io.sparkcomms.collectives.objects;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.KryoException;
import com.esotericsoftware.kryo.Serializer;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.RecordComponent;

/**
 * Kryo serializer of one record class: its components in declaration order, each with its class, read
 * back through the canonical constructor. Kryo 4's field serializer cannot build records (their fields
 * are final and not settable through reflection or Unsafe). A record must not be part of a reference
 * cycle: it exists only after all its components are read.
 */
final class RecordSerializer extends Serializer<Record> {
  private final Method[] accessors;
  private final Constructor<?> canonical;

  /** The serializer of record class {@code type}. */
  RecordSerializer(Class<?> type) {
    super(false, true);
    RecordComponent[] rc = type.getRecordComponents();
    if (rc == null) throw new KryoException(type.getName() + " is not a record");
    accessors = new Method[rc.length];
    Class<?>[] types = new Class<?>[rc.length];
    for (int i = 0; i < rc.length; i++) {
      accessors[i] = rc[i].getAccessor();
      accessors[i].setAccessible(true);
      types[i] = rc[i].getType();
    }
    try {
      canonical = type.getDeclaredConstructor(types);
      canonical.setAccessible(true);
    } catch (NoSuchMethodException e) {
      throw new KryoException(type.getName() + " has no canonical constructor", e);
    }
  }

  @Override public void write(Kryo kryo, Output out, Record r) {
    try {
      for (Method m : accessors) kryo.writeClassAndObject(out, m.invoke(r));
    } catch (IllegalAccessException | InvocationTargetException e) {
      throw new KryoException("reading a component of " + r.getClass().getName(), e);
    }
  }

  @Override public Record read(Kryo kryo, Input in, Class<Record> type) {
    Object[] args = new Object[accessors.length];
    for (int i = 0; i < args.length; i++) args[i] = kryo.readClassAndObject(in);
    try {
      return (Record) canonical.newInstance(args);
    } catch (InstantiationException | IllegalAccessException | InvocationTargetException | IllegalArgumentException e) {
      throw new KryoException("building " + type.getName() + " from its components", e);
    }
  }
}

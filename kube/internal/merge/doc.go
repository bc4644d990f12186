// Package merge is a three-way merge of JSON values that keeps what a
// version of a resource can't hold. Its three values are an object's
// spec and status as JSON decodes them into any (maps, lists, strings,
// float64s or json.Numbers, bools, nil):
//
//   - current: the object converted from the version it was written at;
//   - kept: what the object held before it was read at that version,
//     kept in an annotation because the version can't hold all of it;
//   - lossy: kept after a round trip through that version, which is what
//     the writer saw of it.
//
// Values promises:
//
//   - Where kept and lossy agree, the round trip lost nothing there, and
//     current's stands: a change made at the old version always wins.
//   - Where they differ, kept's is taken unless current changed lossy's
//     (then current's wins): what the version couldn't hold comes back,
//     and nothing else.
//   - Objects are merged field by field, and lists item by item, so a
//     change to one item of a list loses no other item's fields, and
//     none of its own that the version can't hold.
//   - List items are paired by the list-map keys the schema declares for
//     the list (Lists), when every item of the three lists is an object
//     and no two of a list have one key; otherwise by a string field
//     "name", when every item has one and no two of a list share it;
//     otherwise by their place.
//   - Paired by keys or names, an item current has and lossy hasn't was
//     added at the old version, and is current's alone; an item lossy has
//     and current hasn't was removed there, and stays removed; an item of
//     kept that the round trip lost whole, which the old version couldn't
//     hold at all, comes back after the nearest item before it in kept
//     that current still has (first, when there is none), unless current
//     holds an item of its key or name, which wins. The list has
//     current's order.
//   - Paired by place, kept's and lossy's items pair by index, and the
//     lists are merged whole, as a scalar, when their lengths differ.
//     Current's items pair with lossy's by the longest run of items
//     equal in both (a diff): an item current and lossy share is
//     unchanged; between two shared ones, as many items removed as
//     added are items changed in place, and pair by place; an unequal
//     number are items removed and added, and pair with nothing.
//   - The values are never modified; the result shares memory with them.
//     Values reads no state but its arguments.
//
// Package merge imports nothing of kube: it knows JSON, and the list-map
// keys it is handed, not a Resource or a schema's types.
package merge

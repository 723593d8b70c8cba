SELECT -price / 2 + 1e3 FROM items WHERE (price > 3) LIMIT 5 ;

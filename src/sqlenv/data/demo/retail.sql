-- sqlenv demo database: retail
-- A small online homeware shop: product categories, products, customers, orders and order lines.

CREATE TABLE categories (
    category_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT
);

CREATE TABLE products (
    product_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    category_id INTEGER NOT NULL REFERENCES categories(category_id),
    unit_price REAL NOT NULL,
    stock INTEGER NOT NULL,
    supplier TEXT
);

CREATE TABLE customers (
    customer_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT,
    country TEXT NOT NULL,
    signup_date TEXT NOT NULL
);

CREATE TABLE orders (
    order_id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
    order_date TEXT NOT NULL,
    status TEXT NOT NULL,
    shipping_cost REAL NOT NULL
);

CREATE TABLE order_items (
    order_id INTEGER NOT NULL,
    product_id INTEGER NOT NULL,
    quantity INTEGER NOT NULL,
    unit_price REAL NOT NULL,
    PRIMARY KEY (order_id, product_id),
    FOREIGN KEY (order_id) REFERENCES orders(order_id),
    FOREIGN KEY (product_id) REFERENCES products(product_id)
);

INSERT INTO categories (category_id, name, description) VALUES (1, 'Kitchen', 'Cookware, utensils and small appliances');
INSERT INTO categories (category_id, name, description) VALUES (2, 'Outdoor', 'Camping and hiking gear');
INSERT INTO categories (category_id, name, description) VALUES (3, 'Electronics', 'Gadgets and accessories');
INSERT INTO categories (category_id, name, description) VALUES (4, 'Stationery', NULL);
INSERT INTO categories (category_id, name, description) VALUES (5, 'Home Decor', 'Lamps, frames and textiles');
INSERT INTO categories (category_id, name, description) VALUES (6, 'Toys', 'Games and puzzles');
INSERT INTO categories (category_id, name, description) VALUES (7, 'Garden', 'Tools and watering');
INSERT INTO categories (category_id, name, description) VALUES (8, 'Bath', 'Towels and bathroom accessories');
INSERT INTO categories (category_id, name, description) VALUES (9, 'Pet Supplies', NULL);
INSERT INTO categories (category_id, name, description) VALUES (10, 'Fitness', 'Home workout equipment');

INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (1, 'Cast Iron Skillet', 1, 14.49, 23, 'BlueRiver Imports');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (2, 'Chef''s Knife 8in', 1, 48.5, 40, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (3, 'Bamboo Cutting Board', 1, 28.25, 175, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (4, 'French Press', 1, 65.5, 35, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (5, 'Spice Rack', 1, 65.5, 71, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (6, 'Stand Mixer Mini', 1, 27.95, 38, 'BlueRiver Imports');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (7, 'Trail Backpack 30L', 2, 100.49, 179, 'BlueRiver Imports');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (8, 'Camping Lantern', 2, 72.49, 5, 'BlueRiver Imports');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (9, 'Folding Chair', 2, 101.49, 90, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (10, 'Hammock Deluxe', 2, 118.5, 43, 'Acme Supply Co');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (11, 'USB-C Hub', 3, 78.49, 124, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (12, 'Wireless Earbuds', 3, 84.5, 9, 'Acme Supply Co');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (13, 'Portable Charger', 3, 82.99, 180, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (14, 'Smart Plug', 3, 37.49, 64, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (15, 'HD Webcam', 3, 60.25, 161, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (16, 'Bluetooth Speaker', 3, 53.99, 16, 'Acme Supply Co');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (17, 'Dot Grid Notebook', 4, 11.49, 172, 'Keller & Sons');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (18, 'Fountain Pen', 4, 19.49, 147, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (19, 'Desk Organizer', 4, 4.5, 38, 'Keller & Sons');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (20, 'Sticky Notes XL', 4, 14.25, 107, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (21, 'Linen Throw Pillow', 5, 37.5, 107, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (22, 'Brass Table Lamp', 5, 54.5, 110, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (23, 'Oak Picture Frame', 5, 35.25, 40, 'Keller & Sons');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (24, 'Wool Blanket', 5, 40.99, 65, 'Acme Supply Co');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (25, 'Ceramic Vase', 5, 18.95, 69, 'Acme Supply Co');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (26, 'Wooden Puzzle Box', 6, 48.5, 68, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (27, 'Chess Set Classic', 6, 40.95, 56, 'BlueRiver Imports');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (28, 'Kite Rainbow', 6, 28.25, 172, 'Keller & Sons');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (29, 'Building Blocks 500', 6, 29.99, 39, NULL);
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (30, 'Garden Hose 15m', 7, 36.99, 65, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (31, 'Pruning Shears', 7, 27.49, 10, 'Acme Supply Co');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (32, 'Watering Can 5L', 7, 48.25, 45, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (33, 'Cotton Bath Towel', 8, 10.5, 166, 'BlueRiver Imports');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (34, 'Bamboo Bath Mat', 8, 27.5, 87, 'Keller & Sons');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (35, 'Soap Dispenser', 8, 7.99, 60, 'BlueRiver Imports');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (36, 'Dog Bed Medium', 9, 62.25, 140, 'Northwind Goods');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (37, 'Cat Scratching Post', 9, 45.95, 34, 'Keller & Sons');
INSERT INTO products (product_id, name, category_id, unit_price, stock, supplier) VALUES (38, 'Pet Water Fountain', 9, 45.49, 169, 'Acme Supply Co');

INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (1, 'Alice', 'Walsh', 'awalsh1@shop.example', 'Canada', '2023-01-10');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (2, 'Wen', 'Dubois', 'wdubois2@shop.example', 'Germany', '2022-08-16');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (3, 'Fiona', 'Fischer', NULL, 'UK', '2022-07-06');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (4, 'Hiro', 'Okafor', 'hokafor4@shop.example', 'Australia', '2023-03-27');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (5, 'Ximena', 'Schmidt', 'xschmidt5@shop.example', 'Mexico', '2023-05-13');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (6, 'Ravi', 'Nakamura', NULL, 'USA', '2022-02-28');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (7, 'Vera', 'Anderson', NULL, 'France', '2021-08-06');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (8, 'Emma', 'Dubois', 'edubois8@shop.example', 'Germany', '2021-10-10');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (9, 'Rosa', 'O''Brien', 'robrien9@shop.example', 'USA', '2021-05-22');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (10, 'Isabel', 'Castillo', 'icastillo10@shop.example', 'Australia', '2021-04-16');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (11, 'Zoe', 'Young', 'zyoung11@shop.example', 'UK', '2022-02-23');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (12, 'Yara', 'Kowalski', 'ykowalski12@shop.example', 'Germany', '2021-07-30');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (13, 'Ben', 'Quinlan', 'bquinlan13@shop.example', 'France', '2021-06-02');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (14, 'Ravi', 'Ito', 'rito14@shop.example', 'USA', '2023-08-01');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (15, 'Pedro', 'O''Brien', 'pobrien15@shop.example', 'Canada', '2021-05-03');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (16, 'Oscar', 'Patel', 'opatel16@shop.example', 'Germany', '2021-04-16');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (17, 'Vera', 'Umarov', 'vumarov17@shop.example', 'Canada', '2022-08-29');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (18, 'Emma', 'Tanaka', 'etanaka18@shop.example', 'Canada', '2022-01-08');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (19, 'Victor', 'Anderson', 'vanderson19@shop.example', 'Australia', '2021-01-04');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (20, 'Hiro', 'Kowalski', 'hkowalski20@shop.example', 'Germany', '2021-03-18');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (21, 'Jonas', 'Dubois', 'jdubois21@shop.example', 'France', '2021-02-07');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (22, 'Lena', 'Eriksen', 'leriksen22@shop.example', 'Mexico', '2021-06-05');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (23, 'Sara', 'Tanaka', 'stanaka23@shop.example', 'USA', '2023-10-07');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (24, 'Oscar', 'Garcia', 'ogarcia24@shop.example', 'USA', '2021-06-26');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (25, 'Nikolai', 'Dubois', NULL, 'Germany', '2023-07-11');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (26, 'Farid', 'Okafor', 'fokafor26@shop.example', 'USA', '2023-03-03');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (27, 'Rosa', 'Ito', 'rito27@shop.example', 'Mexico', '2022-03-06');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (28, 'Nora', 'Tanaka', 'ntanaka28@shop.example', 'UK', '2022-03-15');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (29, 'Kofi', 'Jensen', 'kjensen29@shop.example', 'Mexico', '2023-05-11');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (30, 'Bianca', 'Tanaka', 'btanaka30@shop.example', 'Mexico', '2022-03-25');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (31, 'Liam', 'Garcia', 'lgarcia31@shop.example', 'UK', '2021-02-06');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (32, 'William', 'Patel', 'wpatel32@shop.example', 'France', '2021-12-03');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (33, 'Yusuf', 'Young', 'yyoung33@shop.example', 'USA', '2022-09-11');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (34, 'Oscar', 'MacLeod', 'omacleod34@shop.example', 'Australia', '2022-06-11');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (35, 'Isabel', 'O''Brien', 'iobrien35@shop.example', 'USA', '2022-12-26');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (36, 'Zoe', 'Lopez', 'zlopez36@shop.example', 'USA', '2021-06-18');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (37, 'Nora', 'Lopez', 'nlopez37@shop.example', 'USA', '2022-06-26');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (38, 'Maya', 'Young', 'myoung38@shop.example', 'Australia', '2023-10-03');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (39, 'Umar', 'Xu', 'uxu39@shop.example', 'Australia', '2022-08-31');
INSERT INTO customers (customer_id, first_name, last_name, email, country, signup_date) VALUES (40, 'Samir', 'Lopez', 'slopez40@shop.example', 'France', '2021-01-04');

INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (1, 12, '2023-02-04', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (2, 24, '2023-02-04', 'shipped', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (3, 40, '2023-02-17', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (4, 3, '2023-03-04', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (5, 3, '2023-03-14', 'cancelled', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (6, 3, '2023-03-22', 'pending', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (7, 1, '2023-03-24', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (8, 1, '2023-04-06', 'shipped', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (9, 1, '2023-04-08', 'cancelled', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (10, 9, '2023-04-30', 'pending', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (11, 4, '2023-05-01', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (12, 29, '2023-05-13', 'pending', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (13, 7, '2023-05-15', 'cancelled', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (14, 28, '2023-05-18', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (15, 34, '2023-05-24', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (16, 30, '2023-05-28', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (17, 4, '2023-05-29', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (18, 37, '2023-06-03', 'pending', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (19, 17, '2023-06-08', 'pending', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (20, 6, '2023-06-18', 'pending', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (21, 5, '2023-07-02', 'pending', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (22, 31, '2023-07-06', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (23, 12, '2023-07-07', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (24, 10, '2023-07-11', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (25, 19, '2023-07-11', 'shipped', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (26, 25, '2023-07-23', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (27, 11, '2023-07-27', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (28, 12, '2023-08-16', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (29, 1, '2023-08-17', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (30, 36, '2023-08-20', 'cancelled', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (31, 34, '2023-08-20', 'shipped', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (32, 25, '2023-08-20', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (33, 3, '2023-08-27', 'shipped', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (34, 9, '2023-09-03', 'cancelled', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (35, 8, '2023-09-14', 'shipped', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (36, 22, '2023-09-24', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (37, 22, '2023-09-25', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (38, 5, '2023-09-27', 'cancelled', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (39, 7, '2023-10-10', 'pending', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (40, 8, '2023-10-17', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (41, 23, '2023-10-19', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (42, 28, '2023-10-24', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (43, 13, '2023-10-31', 'pending', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (44, 5, '2023-11-01', 'cancelled', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (45, 5, '2023-11-03', 'pending', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (46, 5, '2023-11-19', 'shipped', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (47, 9, '2023-11-27', 'shipped', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (48, 38, '2023-11-30', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (49, 29, '2023-12-01', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (50, 6, '2023-12-08', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (51, 4, '2023-12-26', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (52, 25, '2024-01-07', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (53, 1, '2024-01-07', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (54, 9, '2024-01-13', 'shipped', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (55, 11, '2024-01-15', 'shipped', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (56, 20, '2024-01-19', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (57, 10, '2024-01-29', 'shipped', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (58, 16, '2024-02-02', 'cancelled', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (59, 10, '2024-02-11', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (60, 15, '2024-02-26', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (61, 12, '2024-02-27', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (62, 6, '2024-02-28', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (63, 21, '2024-02-29', 'shipped', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (64, 24, '2024-03-04', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (65, 4, '2024-03-13', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (66, 36, '2024-03-26', 'pending', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (67, 3, '2024-03-28', 'cancelled', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (68, 38, '2024-03-28', 'shipped', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (69, 37, '2024-03-31', 'cancelled', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (70, 9, '2024-04-06', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (71, 35, '2024-04-16', 'cancelled', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (72, 27, '2024-04-18', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (73, 9, '2024-04-19', 'cancelled', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (74, 7, '2024-04-22', 'pending', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (75, 18, '2024-05-02', 'pending', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (76, 10, '2024-05-12', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (77, 2, '2024-05-12', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (78, 14, '2024-05-14', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (79, 1, '2024-05-14', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (80, 22, '2024-05-17', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (81, 5, '2024-05-20', 'delivered', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (82, 28, '2024-05-22', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (83, 28, '2024-06-04', 'delivered', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (84, 34, '2024-06-06', 'pending', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (85, 1, '2024-06-08', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (86, 28, '2024-06-13', 'delivered', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (87, 15, '2024-06-14', 'cancelled', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (88, 15, '2024-06-15', 'delivered', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (89, 2, '2024-06-15', 'shipped', 0.0);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (90, 17, '2024-06-16', 'shipped', 12.25);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (91, 6, '2024-06-21', 'shipped', 7.5);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (92, 10, '2024-06-21', 'pending', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (93, 12, '2024-06-24', 'shipped', 4.99);
INSERT INTO orders (order_id, customer_id, order_date, status, shipping_cost) VALUES (94, 40, '2024-06-26', 'shipped', 4.99);

INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (1, 1, 1, 13.04);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (1, 17, 1, 11.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (2, 11, 1, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (3, 35, 1, 7.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (4, 8, 2, 72.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (4, 26, 1, 48.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (4, 33, 1, 10.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (5, 23, 1, 35.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (5, 29, 1, 29.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (6, 38, 2, 45.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (7, 11, 2, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (7, 23, 1, 35.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (8, 4, 1, 65.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (8, 12, 1, 84.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (9, 26, 1, 48.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (9, 29, 4, 29.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (10, 2, 1, 48.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (10, 11, 1, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (10, 19, 3, 4.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (11, 16, 2, 53.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (12, 28, 2, 28.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (13, 18, 1, 19.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (14, 3, 1, 28.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (14, 13, 1, 82.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (14, 28, 4, 28.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (15, 10, 1, 106.65);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (15, 17, 3, 11.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (16, 12, 1, 84.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (16, 38, 2, 45.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (17, 2, 4, 43.65);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (18, 8, 3, 72.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (18, 28, 1, 28.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (18, 31, 1, 27.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (19, 5, 1, 65.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (19, 19, 4, 4.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (20, 22, 1, 54.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (21, 29, 4, 29.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (22, 33, 4, 10.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (23, 9, 1, 101.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (23, 29, 4, 29.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (24, 11, 1, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (24, 14, 3, 37.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (24, 27, 1, 40.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (25, 31, 1, 27.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (25, 33, 1, 10.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (25, 34, 1, 27.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (26, 12, 1, 84.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (27, 15, 4, 60.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (27, 31, 1, 24.74);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (28, 37, 1, 45.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (29, 32, 1, 48.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (30, 5, 2, 58.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (30, 15, 1, 60.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (31, 15, 2, 54.23);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (31, 22, 1, 54.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (32, 15, 1, 60.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (32, 16, 4, 53.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (33, 6, 1, 27.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (34, 13, 3, 82.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (35, 33, 3, 10.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (35, 34, 2, 27.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (36, 33, 1, 10.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (37, 35, 2, 7.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (37, 37, 1, 41.36);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (38, 19, 1, 4.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (38, 25, 4, 17.05);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (38, 30, 1, 36.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (39, 27, 2, 40.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (39, 29, 4, 29.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (39, 32, 4, 48.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (40, 11, 1, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (40, 25, 2, 18.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (41, 17, 2, 11.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (42, 21, 2, 37.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (43, 14, 2, 33.74);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (44, 2, 3, 48.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (45, 15, 3, 60.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (45, 23, 1, 35.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (45, 36, 4, 62.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (46, 20, 4, 14.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (46, 23, 1, 35.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (46, 36, 1, 62.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (47, 32, 1, 43.43);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (48, 10, 3, 118.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (49, 7, 1, 90.44);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (50, 22, 1, 54.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (51, 35, 4, 7.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (52, 12, 1, 84.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (52, 16, 1, 53.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (53, 26, 2, 48.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (54, 25, 4, 18.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (55, 10, 3, 118.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (56, 7, 1, 100.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (56, 30, 4, 33.29);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (57, 12, 3, 76.05);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (58, 6, 3, 27.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (59, 2, 1, 43.65);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (59, 8, 1, 72.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (59, 11, 1, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (60, 1, 3, 14.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (60, 2, 4, 48.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (60, 15, 3, 60.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (61, 3, 4, 28.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (62, 10, 1, 118.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (63, 24, 1, 36.89);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (64, 4, 1, 58.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (65, 37, 1, 45.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (66, 21, 2, 37.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (67, 3, 3, 28.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (67, 13, 4, 82.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (67, 34, 1, 27.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (68, 36, 1, 56.02);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (69, 21, 1, 37.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (70, 18, 3, 17.54);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (71, 7, 1, 90.44);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (71, 29, 2, 29.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (71, 33, 2, 10.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (72, 9, 4, 101.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (72, 15, 1, 60.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (73, 24, 4, 40.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (74, 24, 1, 40.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (75, 35, 1, 7.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (76, 20, 3, 14.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (77, 15, 3, 54.23);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (78, 4, 1, 65.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (79, 23, 2, 35.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (80, 12, 2, 84.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (81, 16, 1, 48.59);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (81, 34, 4, 27.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (82, 11, 1, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (83, 20, 2, 14.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (83, 23, 1, 35.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (84, 11, 2, 78.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (84, 15, 1, 60.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (84, 21, 1, 37.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (85, 3, 4, 28.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (86, 38, 2, 45.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (87, 13, 2, 82.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (87, 34, 1, 27.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (87, 37, 2, 45.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (88, 12, 4, 84.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (88, 19, 3, 4.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (89, 9, 3, 91.34);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (89, 19, 4, 4.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (89, 24, 4, 40.99);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (90, 18, 4, 19.49);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (91, 36, 1, 62.25);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (92, 37, 4, 45.95);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (93, 4, 2, 65.5);
INSERT INTO order_items (order_id, product_id, quantity, unit_price) VALUES (94, 2, 3, 48.5);
